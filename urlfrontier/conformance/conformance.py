#!/usr/bin/python3
"""Conformance suite of Sieve's URLFrontier API (crawler serve), driven
from Python through Debian's python3-grpcio, a client not written in Go.

The stubs are generated at start from the repository's .proto with protoc
and grpc_python_plugin. The environment gives:

  SIEVE_CRAWLER  the crawler binary
  SIEVE_PROTO    urlfrontier.proto
  SIEVE_NATS     a NATS server (JetStream) for the two-server tests
  SIEVE_REDIS    a Redis server for them
  SIEVE_TLS      a JSON file naming the TLS and token files of the secured
                 tests: a CA, serve's certificate, a client certificate of
                 that CA (fetcher-2, given the crawl role), one of another
                 CA, and a tokens file with a token per role

cmd/crawler's TestURLFrontierConformance builds the binary, starts the
servers and runs this file; it prints unittest's summary and exits non-zero
on any failure.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

import grpc
from google.protobuf import json_format

WORK = tempfile.mkdtemp(prefix="sieve-conformance-")
PROTO = os.environ["SIEVE_PROTO"]
subprocess.run(["protoc", "-I", os.path.dirname(PROTO), "--python_out=" + WORK,
                "--grpc_python_out=" + WORK, "--plugin=protoc-gen-grpc_python=" + os.environ.get("GRPC_PYTHON_PLUGIN", "/usr/bin/grpc_python_plugin"),
                PROTO], check=True)
sys.path.insert(0, WORK)
import urlfrontier_pb2 as pb  # noqa: E402
import urlfrontier_pb2_grpc as rpc  # noqa: E402

OK, SKIPPED, FAIL = pb.AckMessage.OK, pb.AckMessage.SKIPPED, pb.AckMessage.FAIL
CRAWLER = os.environ["SIEVE_CRAWLER"]
LISTENING = re.compile(r"urlfrontier listening on (\S+)")


class Serve:
    """One `crawler serve` process and a client of it."""

    def __init__(self, *args, credentials=None):
        # Each process keeps its index of the queues in a data dir of its
        # own unless told one (a restart on its directory).
        if "--data-dir" not in args:
            args = ("--data-dir", tempfile.mkdtemp(prefix="serve-data-", dir=WORK)) + args
        self.args = [CRAWLER, "serve", "--urlfrontier-addr", "127.0.0.1:0", "--http-addr", "",
                     "--urlfrontier-max-batch", "1000", "--urlfrontier-max-message-bytes", "1MiB"] + list(args)
        self.log = tempfile.NamedTemporaryFile(prefix="serve-", suffix=".log", dir=WORK, delete=False)
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + 30
        self.addr = None
        while self.addr is None:
            with open(self.log.name) as f:
                m = LISTENING.search(f.read())
            if m:
                self.addr = m.group(1)
            elif self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("serve did not start: " + open(self.log.name).read())
            else:
                time.sleep(0.02)
        if credentials is None:
            self.channel = grpc.insecure_channel(self.addr)
        else:
            self.channel = grpc.secure_channel(self.addr, credentials)
        self.stub = rpc.URLFrontierStub(self.channel)

    def kill(self):
        """SIGKILL: nothing is saved on the way out."""
        self.channel.close()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    # Helpers over the stub.

    def put(self, *items):
        """PutURLs: the acks' statuses by ID, one ack per item."""
        acks = list(self.stub.PutURLs(iter(items), timeout=30))
        assert len(acks) == len(items), (acks, items)
        return {a.ID: a.status for a in acks}

    def get(self, crawl=None, key="", per_queue=0, queues=0, lease=0):
        """GetURLs: the URLs handed out."""
        p = pb.GetParams(max_urls_per_queue=per_queue, max_queues=queues, key=key, delay_requestable=lease)
        if crawl is None:
            p.anyCrawlID.SetInParent()
        else:
            p.crawlID = crawl
        return [u.url for u in self.stub.GetURLs(p, timeout=30)]


def disc(url, crawl="", key="", id="", meta=None):
    info = pb.URLInfo(url=url, key=key, crawlID=crawl)
    for k, v in (meta or {}).items():
        info.metadata[k].values.extend(v)
    return pb.URLItem(discovered=pb.DiscoveredURLItem(info=info), ID=id)


def known(url, crawl="", refetch=0, key=""):
    return pb.URLItem(known=pb.KnownURLItem(info=pb.URLInfo(url=url, key=key, crawlID=crawl), refetchable_from_date=refetch))


def eventually(what, cond, timeout=10):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError("not within %ss: %s" % (timeout, what))
        time.sleep(0.02)


class OneServer(unittest.TestCase):
    """The semantics of each call, on one embedded serve; each test has
    its own crawl."""

    @classmethod
    def setUpClass(cls):
        cls.s = Serve("--embedded", "--data-dir", tempfile.mkdtemp(dir=WORK))

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    def crawl(self, delay=0):
        c = self.id().rsplit(".", 1)[-1][:60]
        self.s.stub.SetDelay(pb.QueueDelayParams(key="", delay_requestable=delay, crawlID=c))
        return c

    def test_put_urls_statuses(self):
        c = self.crawl()
        s = self.s
        self.assertEqual(s.put(disc("https://example.com/a", c)), {"https://example.com/a": OK})
        got = s.put(disc("https://example.com/a", c),                   # known
                    disc("HTTPS://EXAMPLE.com:443/a#x", c, id="alike"),  # canonicalizes alike
                    disc("https://example.com/b", c, id="my-id"),        # the ID echoed
                    disc("mailto:x@example.com", c, id="policy"),        # rejected by policy
                    disc("http://[::1", c, id="unparsable"),
                    disc("https://example.com/c", c, key="k" * 256, id="long-key"),
                    disc("https://example.com/d", "no such id!", id="bad-crawl"))
        self.assertEqual(got, {"https://example.com/a": SKIPPED, "alike": SKIPPED, "my-id": OK, "policy": SKIPPED,
                               "unparsable": SKIPPED, "long-key": SKIPPED, "bad-crawl": SKIPPED})

    def test_put_discovered_batches(self):
        c = self.crawl()
        batches = [pb.DiscoveredBatch(ID="p1", items=[pb.URLInfo(url="https://d.example/%d" % i, crawlID=c) for i in range(5)]),
                   pb.DiscoveredBatch(ID="p2", items=[pb.URLInfo(url="https://d.example/4", crawlID=c),
                                                      pb.URLInfo(url="https://d.example/5", crawlID=c),
                                                      pb.URLInfo(url="ftp://d.example/", crawlID=c)])]
        acks = list(self.s.stub.PutDiscovered(iter(batches), timeout=30))
        self.assertEqual([a.ID for a in acks], ["p1", "p2"])
        p1, p2 = list(acks[0].statuses), list(acks[1].statuses)
        self.assertEqual((p1[:4], p2[1:]), ([OK] * 4, [OK, SKIPPED]))
        # d.example/4 is in both batches, admitted at once: once OK.
        self.assertEqual(sorted([p1[4], p2[0]]), [OK, SKIPPED])

    def test_get_urls_limits_and_lease(self):
        c = self.crawl()
        s = self.s
        s.put(*[disc("https://q%d.example/%d" % (q, i), c) for q in range(4) for i in range(3)])
        self.assertEqual(len(s.get(c, per_queue=2, queues=3, lease=3)), 6)  # 3 queues × 2
        self.assertEqual(len(s.get(c, per_queue=2, lease=3)), 2)            # only the 4th queue: the others have 2 in process
        self.assertEqual(s.get(c, key="q0.example", per_queue=2, lease=3), [])
        self.assertEqual(s.get("other", lease=3), [])                       # another crawl
        time.sleep(3.1)  # every lease (3 s) ends: the URLs are handed out again
        mine = [u for u in s.get(None, per_queue=3, lease=60) if u.startswith("https://q")]
        self.assertEqual(len(mine), 12)

    def test_known_completes_or_schedules_refetch(self):
        c = self.crawl()
        s = self.s
        s.put(disc("https://k.example/done", c), disc("https://k.example/again", c), disc("https://k.example/soon", c))
        self.assertEqual(len(s.get(c, lease=60)), 3)
        now = int(time.time())
        self.assertEqual(set(s.put(known("https://k.example/done", c), known("https://k.example/again", c, now + 6),
                                   known("https://k.example/soon", c, now + 2)).values()), {OK})
        stats = s.stub.GetStats(pb.QueueWithinCrawlParams(crawlID=c))
        self.assertEqual((stats.size, stats.inProcess, stats.counts["completed"]), (2, 0, 1))
        self.assertEqual(s.get(c, lease=60), [])
        eventually("the earlier refetch date first", lambda: s.get(c, lease=60) == ["https://k.example/soon"], 10)
        eventually("the later one", lambda: s.get(c, lease=60) == ["https://k.example/again"], 10)
        self.assertEqual(s.put(disc("https://k.example/done", c)), {"https://k.example/done": SKIPPED})

    def test_delay_block_limit(self):
        c = self.crawl(delay=1)
        s = self.s
        s.put(*[disc("https://b.example/%d" % i, c) for i in range(6)])
        s.stub.SetDelay(pb.QueueDelayParams(key="b.example", delay_requestable=3, crawlID=c))
        self.assertEqual(len(s.get(c, per_queue=1, lease=60)), 1)
        self.assertEqual(s.get(c, per_queue=5, lease=60), [])  # within its delay
        time.sleep(3.1)
        s.stub.BlockQueueUntil(pb.BlockQueueParams(key="b.example", time=int(time.time()) + 3600, crawlID=c))
        self.assertEqual(s.get(c, per_queue=5, lease=60), [])
        self.assertEqual(list(s.stub.ListQueues(pb.Pagination(crawlID=c)).values), [])  # blocked: inactive
        self.assertEqual(list(s.stub.ListQueues(pb.Pagination(crawlID=c, include_inactive=True)).values), ["b.example"])
        s.stub.BlockQueueUntil(pb.BlockQueueParams(key="b.example", time=0, crawlID=c))
        s.stub.SetCrawlLimit(pb.CrawlLimitParams(key="b.example", limit=3, crawlID=c))
        self.assertEqual(len(s.get(c, per_queue=5, lease=60)), 2)  # 1 in process + 2 = the limit

    def test_active(self):
        c = self.crawl()
        s = self.s
        s.put(disc("https://a.example/1", c))
        s.stub.SetActive(pb.Active(state=False, local=True))
        try:
            self.assertFalse(s.stub.GetActive(pb.Local(local=True)).state)
            self.assertEqual(s.get(c), [])
            self.assertEqual(s.put(disc("https://a.example/2", c)), {"https://a.example/2": OK})
        finally:
            s.stub.SetActive(pb.Active(state=True, local=True))
        self.assertTrue(s.stub.GetActive(pb.Local()).state)
        self.assertEqual(len(s.get(c)), 2)

    def test_queues_stats_and_listings(self):
        c = self.crawl()
        s = self.s
        s.put(disc("https://l.example/Page", c, meta={"depth": ["2"], "source": ["x", "y"]}),
              disc("https://l.example/other", c), *[disc("https://l%d.example/" % i, c) for i in range(5)])
        page = s.stub.ListQueues(pb.Pagination(crawlID=c, start=2, size=3))
        self.assertEqual((list(page.values), page.total, page.start, page.size), (["l1.example", "l2.example", "l3.example"], 6, 2, 3))
        stats = s.stub.GetStats(pb.QueueWithinCrawlParams(crawlID=c))
        self.assertEqual((stats.size, stats.numberOfQueues, stats.counts["active_queues"], stats.crawlID), (7, 6, 6, c))
        self.assertEqual(s.stub.CountURLs(pb.CountUrlParams(crawlID=c, filter="page", ignoreCase=True)).value, 1)
        self.assertEqual(s.stub.CountURLs(pb.CountUrlParams(crawlID=c, filter="page")).value, 0)
        # Known items, as the reference lists them: due since they were stored.
        items = list(s.stub.ListURLs(pb.ListUrlParams(crawlID=c, key="l.example")))
        self.assertEqual([i.known.info.url for i in items], ["https://l.example/Page", "https://l.example/other"])
        self.assertEqual(list(items[0].known.info.metadata["source"].values), ["x", "y"])
        self.assertGreater(items[0].creation_date, 0)
        self.assertEqual(items[0].known.refetchable_from_date, items[0].creation_date)
        st = s.stub.GetURLStatus(pb.URLStatusRequest(url="https://l.example/Page", crawlID=c))
        self.assertEqual((st.known.info.url, st.known.refetchable_from_date), ("https://l.example/Page", items[0].creation_date))
        s.get(c, key="l.example", lease=120)
        st = s.stub.GetURLStatus(pb.URLStatusRequest(url="https://l.example/Page", crawlID=c))
        self.assertTrue(st.HasField("known"))  # in process: back at the lease's end
        self.assertGreater(st.known.refetchable_from_date, time.time() + 100)
        s.put(known("https://l.example/Page", c))
        st = s.stub.GetURLStatus(pb.URLStatusRequest(url="https://l.example/Page", crawlID=c))
        self.assertEqual(st.known.refetchable_from_date, 0)  # completed: exact, the store keeps it
        with self.assertRaises(grpc.RpcError) as e:
            s.stub.GetURLStatus(pb.URLStatusRequest(url="https://l.example/never", crawlID=c))
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertEqual(s.stub.DeleteQueue(pb.QueueWithinCrawlParams(crawlID=c, key="l0.example")).value, 1)
        self.assertEqual(s.stub.PurgeURLs(pb.PurgeUrlParams(crawlID=c, days=1)).value, 0)  # all younger than a day
        self.assertEqual(s.stub.PurgeURLs(pb.PurgeUrlParams(crawlID=c, days=0)).value, 4)  # l.example/other is in process
        s.stub.SetLogLevel(pb.LogLevelParams(package="org.example", level=pb.LogLevelParams.DEBUG))
        self.assertIn(s.addr, s.stub.ListNodes(pb.Empty()).values)

    def test_crawls(self):
        c = self.crawl()
        s = self.s
        s.put(disc("https://c.example/1", c), disc("https://c.example/2", c))
        self.assertIn(c, s.stub.ListCrawls(pb.Local()).values)
        self.assertEqual(s.stub.DeleteCrawl(pb.DeleteCrawlMessage(value=c)).value, 2)
        self.assertNotIn(c, s.stub.ListCrawls(pb.Local()).values)
        # The id is free at once: its URLs are new again.
        self.assertEqual(s.put(disc("https://c.example/1", c)), {"https://c.example/1": OK})
        # crawlID "" is DEFAULT.
        s.put(disc("https://default.example/", ""))
        self.assertEqual(s.stub.GetStats(pb.QueueWithinCrawlParams(crawlID="DEFAULT")).crawlID, "DEFAULT")

    def test_unknown_crawl_is_empty(self):
        """As the reference: a crawl that does not exist, or no longer does,
        reads as an empty one and deletes nothing (upstream's tests delete
        a crawl before using it and read its stats once deleted)."""
        c = self.crawl()
        s = self.s
        s.put(disc("https://gone.example/1", c))
        self.assertEqual(s.stub.DeleteCrawl(pb.DeleteCrawlMessage(value=c)).value, 1)
        for crawl in ("neverused", c):
            self.assertEqual(s.stub.DeleteCrawl(pb.DeleteCrawlMessage(value=crawl)).value, 0)
            st = s.stub.GetStats(pb.QueueWithinCrawlParams(crawlID=crawl))
            self.assertEqual((st.crawlID, st.size, st.numberOfQueues, st.inProcess), (crawl, 0, 0, 0))
            self.assertEqual(s.stub.GetStats(pb.QueueWithinCrawlParams(crawlID=crawl, key="gone.example")).numberOfQueues, 0)
            self.assertEqual(s.stub.ListQueues(pb.Pagination(crawlID=crawl, include_inactive=True)).total, 0)
            self.assertEqual(list(s.stub.ListURLs(pb.ListUrlParams(crawlID=crawl))), [])
            self.assertEqual(s.stub.CountURLs(pb.CountUrlParams(crawlID=crawl)).value, 0)
            self.assertEqual(s.stub.PurgeURLs(pb.PurgeUrlParams(crawlID=crawl)).value, 0)
            self.assertEqual(s.stub.DeleteQueue(pb.QueueWithinCrawlParams(crawlID=crawl, key="gone.example")).value, 0)
            with self.assertRaises(grpc.RpcError) as e:
                s.stub.GetURLStatus(pb.URLStatusRequest(url="https://gone.example/1", crawlID=crawl))
            self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertNotIn("neverused", s.stub.ListCrawls(pb.Local()).values)

    def test_bad_input(self):
        c = self.crawl()
        s = self.s
        for call, arg, code in [
            (s.stub.GetStats, pb.QueueWithinCrawlParams(crawlID="bad id"), grpc.StatusCode.INVALID_ARGUMENT),
            (s.stub.CountURLs, pb.CountUrlParams(crawlID="bad id"), grpc.StatusCode.INVALID_ARGUMENT),
            (s.stub.BlockQueueUntil, pb.BlockQueueParams(key="", time=1, crawlID=c), grpc.StatusCode.INVALID_ARGUMENT),
            (s.stub.SetCrawlLimit, pb.CrawlLimitParams(key="x" * 300, limit=1, crawlID=c), grpc.StatusCode.INVALID_ARGUMENT),
        ]:
            with self.assertRaises(grpc.RpcError) as e:
                call(arg, timeout=10)
            self.assertEqual(e.exception.code(), code, call)
        big = pb.DiscoveredBatch(ID="big", items=[pb.URLInfo(url="https://big.example/%d" % i, crawlID=c) for i in range(1001)])
        with self.assertRaises(grpc.RpcError) as e:
            list(s.stub.PutDiscovered(iter([big]), timeout=10))
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(grpc.RpcError) as e:
            s.put(disc("https://huge.example/" + "a" * (2 << 20), c))
        self.assertEqual(e.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(s.put(known("https://date.example/", c, refetch=int(time.time() * 1000000))),
                         {"https://date.example/": SKIPPED})  # a date in microseconds: malformed
        # A client that disconnects mid-stream, then resends everything:
        # nothing is admitted twice.
        urls = ["https://cut.example/%d" % i for i in range(200)]
        call = s.stub.PutURLs(iter([disc(u, c) for u in urls]), timeout=30)
        next(call)
        call.cancel()
        acks = s.put(*[disc(u, c) for u in urls])
        self.assertEqual(s.stub.CountURLs(pb.CountUrlParams(crawlID=c, filter="cut.example")).value, 200)
        self.assertEqual(sorted(s.get(c, per_queue=1000, lease=60)), sorted(urls))
        self.assertEqual(set(acks.values()) - {OK, SKIPPED}, set())
        self.assertEqual(s.put(disc("https://after.example/", c)), {"https://after.example/": OK})


class ReferenceClient(unittest.TestCase):
    """What the reference service's own tests (crawler-commons/url-frontier
    2.6, module tests/) check, as a client of the reference would use serve:
    the crawl DEFAULT and others, each test starting from an empty frontier
    on a serve of its own class. Written for Sieve; none of their code."""

    @classmethod
    def setUpClass(cls):
        cls.s = Serve("--embedded", "--data-dir", tempfile.mkdtemp(dir=WORK))

    @classmethod
    def tearDownClass(cls):
        cls.s.stop()

    def setUp(self):
        # As upstream's setup: delete what a test before left, including a
        # crawl that may not exist (0, not an error).
        for c in list(self.s.stub.ListCrawls(pb.Local(local=True)).values) + ["BESPOKE", ""]:
            self.s.stub.DeleteCrawl(pb.DeleteCrawlMessage(value=c))
        self.assertEqual(list(self.s.stub.ListCrawls(pb.Local(local=True)).values), [])

    def stats(self, crawl="", key=""):
        return self.s.stub.GetStats(pb.QueueWithinCrawlParams(crawlID=crawl, key=key))

    def test_never_refetched(self):
        s = self.s
        self.assertEqual(s.put(known("http://key1.com/", key="key1.com")), {"http://key1.com/": OK})
        self.assertEqual(s.get("DEFAULT", key="key1.com", per_queue=1, lease=2), [])

    def test_right_order(self):
        s = self.s
        now = int(time.time())
        s.put(known("http://key1.com/later", key="key1.com", refetch=now),
              known("http://key1.com/sooner", key="key1.com", refetch=now - 10000))
        self.assertEqual(s.get("DEFAULT", key="key1.com", per_queue=2, lease=2)[0], "http://key1.com/sooner")

    def test_updates(self):
        s = self.s
        acks = list(s.stub.PutURLs(iter([disc("http://key1.com/", key="key1.com")] * 2), timeout=30))
        self.assertEqual([a.status for a in acks], [OK, SKIPPED])  # two acks, one URL
        self.assertEqual(len(s.stub.ListQueues(pb.Pagination()).values), 1)
        self.assertEqual(s.get("DEFAULT", key="key1.com", per_queue=1, lease=2), ["http://key1.com/"])
        st = self.stats(key="key1.com")
        self.assertEqual((st.numberOfQueues, st.inProcess), (1, 1))
        self.assertEqual(s.get("DEFAULT", key="key1.com", per_queue=1, lease=2), [])  # in process
        time.sleep(2)  # the lease ends
        st = self.stats(key="key1.com")
        self.assertEqual((st.numberOfQueues, st.inProcess), (1, 0))
        self.assertEqual(s.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="key1.com")).value, 1)
        self.assertEqual(self.stats(key="key1.com").numberOfQueues, 0)

    def test_queue_names(self):
        s = self.s
        s.put(disc("http://gac.icann.org?language_id=9"))  # no key, no path: the host is the queue
        self.assertEqual(self.stats(key="gac.icann.org").size, 1)
        self.assertEqual(s.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="gac.icann.org")).value, 1)

    def test_crawl_ids(self):
        s = self.s
        self.assertEqual(list(s.stub.ListCrawls(pb.Local()).values), [])
        s.put(disc("http://urlfrontier.net/", "BESPOKE"))
        s.put(disc("http://urlfrontier.net/"))            # implicit DEFAULT
        s.put(disc("http://urlfrontier.net/", "DEFAULT"))  # explicit: the same URL again
        for crawl, want in (("", "DEFAULT"), ("BESPOKE", "BESPOKE")):
            st = self.stats(crawl)
            self.assertEqual((st.size, st.crawlID, st.numberOfQueues), (1, want, 1))
        s.stub.DeleteCrawl(pb.DeleteCrawlMessage(value="BESPOKE"))
        st = self.stats("BESPOKE")  # deleted: stats of zero, not NOT_FOUND
        self.assertEqual((st.crawlID, st.size), ("BESPOKE", 0))
        s.stub.DeleteCrawl(pb.DeleteCrawlMessage())
        self.assertEqual(self.stats("").size, 0)

    def dump(self, threads=1):
        """The reference client's DumpURLs: JSON lines of the items
        ListURLs gives, each crawl whole, or queue by queue on threads."""
        s = self.s
        crawls = list(s.stub.ListCrawls(pb.Local(local=True)).values)
        if threads == 1:
            items = [it for c in crawls for it in s.stub.ListURLs(pb.ListUrlParams(crawlID=c, size=2**31 - 1))]
        else:
            work = [(c, q) for c in crawls
                    for q in s.stub.ListQueues(pb.Pagination(crawlID=c, include_inactive=True, local=True, size=10000)).values]
            with ThreadPoolExecutor(threads) as pool:
                lists = pool.map(lambda cq: list(s.stub.ListURLs(pb.ListUrlParams(crawlID=cq[0], key=cq[1], size=2**31 - 1))), work)
            items = [it for l in lists for it in l]
        return [json_format.MessageToJson(it, indent=None) for it in items]

    def reload(self, lines):
        """Empty the frontier, then the reference client's PutURLs -f."""
        for c in self.s.stub.ListCrawls(pb.Local(local=True)).values:
            self.s.stub.DeleteCrawl(pb.DeleteCrawlMessage(value=c))
        self.assertEqual(list(self.s.stub.ListCrawls(pb.Local(local=True)).values), [])
        items = [json_format.Parse(l, pb.URLItem()) for l in lines]
        self.assertEqual(set(self.s.put(*items).values()), {OK})

    def test_dump_round_trip(self):
        s = self.s
        later = int(time.time()) + 3600
        self.assertEqual(len(s.put(disc("http://example.com/discovered", key="example.com", meta={"source": ["seed"]}),
                                   known("http://example.com/done", key="example.com"),
                                   known("http://example.com/later", key="example.com", refetch=later),
                                   disc("http://bespoke.com/", "BESPOKE", key="bespoke.com"))), 4)
        lines = self.dump()
        self.assertEqual(len(lines), 4)
        self.assertTrue(all(json_format.Parse(l, pb.URLItem()).HasField("known") for l in lines))
        self.reload(lines)

        def status(url):
            return s.stub.GetURLStatus(pb.URLStatusRequest(url=url, key="example.com", crawlID="DEFAULT")).known
        self.assertEqual(status("http://example.com/done").refetchable_from_date, 0)
        self.assertEqual(status("http://example.com/later").refetchable_from_date, later)
        self.assertEqual(list(status("http://example.com/discovered").info.metadata["source"].values), ["seed"])
        self.assertEqual(s.stub.CountURLs(pb.CountUrlParams(crawlID="BESPOKE")).value, 1)

    def test_parallel_dump(self):
        s = self.s
        s.put(*[disc("http://site%d.com/page%d" % (i % 10, i)) for i in range(20)], disc("http://bespoke.com/", "BESPOKE"))
        lines = self.dump(threads=4)
        self.assertEqual(len(lines), 21)
        self.reload(lines)
        self.assertEqual(s.stub.CountURLs(pb.CountUrlParams(crawlID="DEFAULT")).value, 20)
        self.assertEqual(s.stub.CountURLs(pb.CountUrlParams(crawlID="BESPOKE")).value, 1)


class Restart(unittest.TestCase):
    """Leases, delays, blocks and scheduled refetches survive a SIGKILL."""

    def test_sigkill(self):
        data = tempfile.mkdtemp(dir=WORK)
        s = Serve("--embedded", "--data-dir", data)
        try:
            now = int(time.time())
            s.put(disc("https://lease.example/"), disc("https://delay.example/1"), disc("https://delay.example/2"),
                  disc("https://block.example/"), disc("https://refetch.example/"))
            s.stub.SetDelay(pb.QueueDelayParams(key="delay.example", delay_requestable=3600))
            s.stub.BlockQueueUntil(pb.BlockQueueParams(key="block.example", time=now + 3600))
            self.assertEqual(s.get(key="lease.example", lease=3600), ["https://lease.example/"])
            self.assertEqual(len(s.get(key="delay.example", per_queue=1, lease=1)), 1)
            self.assertEqual(s.get(key="refetch.example", lease=3600), ["https://refetch.example/"])
            s.put(known("https://refetch.example/", refetch=now + 3600))
        finally:
            s.kill()
        time.sleep(1.1)  # the delay.example lease (1 s) has ended; its delay has not
        s = Serve("--embedded", "--data-dir", data)
        try:
            self.assertEqual(s.get(None, per_queue=10, lease=60), [])
            st = s.stub.GetStats(pb.QueueWithinCrawlParams())
            self.assertEqual((st.size, st.inProcess), (4, 1))
            self.assertEqual(s.put(disc("https://lease.example/")), {"https://lease.example/": SKIPPED})
        finally:
            s.stop()


@unittest.skipUnless(os.environ.get("SIEVE_NATS") and os.environ.get("SIEVE_REDIS"), "needs SIEVE_NATS and SIEVE_REDIS")
class TwoServers(unittest.TestCase):
    """Two serve processes on one deployment share the queues."""

    def test_shared(self):
        dep = ["--nats-url", os.environ["SIEVE_NATS"], "--redis-url", os.environ["SIEVE_REDIS"]]
        a, b = Serve(*dep), Serve(*dep)
        try:
            b.stub.SetDelay(pb.QueueDelayParams(key="", delay_requestable=0, crawlID="shared"))
            urls = ["https://s%d.example/%d" % (q, i) for q in range(10) for i in range(10)]
            self.assertEqual(set(a.put(*[disc(u, "shared") for u in urls]).values()), {OK})
            self.assertEqual(set(b.put(*[disc(u, "shared") for u in urls[:10]]).values()), {SKIPPED})
            eventually("b lists a's URLs", lambda: b.stub.CountURLs(pb.CountUrlParams(crawlID="shared")).value == 100)
            handed = []
            for _ in range(20):
                for s in (a, b):
                    got = s.get("shared", per_queue=1, lease=60)
                    handed += got
                    if got:
                        (b if s is a else a).put(*[known(u, "shared") for u in got])
            self.assertEqual(sorted(handed), sorted(urls))  # each once
            self.assertEqual(sorted(a.stub.ListNodes(pb.Empty()).values), sorted([a.addr, b.addr]))
            b.put(disc("https://late.example/", "shared"))
            a.stub.SetActive(pb.Active(state=False, local=False))
            eventually("SetActive(local=false) reaches b", lambda: not b.stub.GetActive(pb.Local(local=True)).state)
            self.assertFalse(a.stub.GetActive(pb.Local()).state)
            self.assertEqual(b.get("shared"), [])
            a.stub.SetActive(pb.Active(state=True, local=False))
            eventually("b active again", lambda: b.stub.GetActive(pb.Local(local=True)).state)
            eventually("b hands out late.example", lambda: b.get("shared", lease=60) == ["https://late.example/"])
            # A lease taken on b holds on a.
            b.put(disc("https://lease2.example/", "shared"))
            self.assertEqual(b.get("shared", key="lease2.example", lease=60), ["https://lease2.example/"])
            self.assertEqual(a.get("shared", key="lease2.example", lease=60), [])
        finally:
            a.stop()
            b.stop()


ALLOWED = "allowed"


def read(path):
    with open(path, "rb") as f:
        return f.read()


@unittest.skipUnless(os.environ.get("SIEVE_TLS"), "needs SIEVE_TLS")
class Secured(unittest.TestCase):
    """serve with TLS, client certificates and tokens (issue 29): each
    role's calls are answered, the others refused with UNAUTHENTICATED
    or PERMISSION_DENIED, and bad TLS is refused in the handshake."""

    @classmethod
    def setUpClass(cls):
        with open(os.environ["SIEVE_TLS"]) as f:
            cls.f = json.load(f)
        f = cls.f
        cls.s = Serve("--embedded", "--urlfrontier-tls-cert", f["cert"], "--urlfrontier-tls-key", f["key"],
                      "--urlfrontier-tls-client-ca", f["ca"], "--urlfrontier-tokens-file", f["tokens"],
                      "--urlfrontier-client-roles", "fetcher-2=crawl",
                      credentials=grpc.ssl_channel_credentials(read(f["ca"])))
        cls.channels = []

    @classmethod
    def tearDownClass(cls):
        for c in cls.channels:
            c.close()
        cls.s.stop()

    def stub(self, token=None, client=None, ca=None):
        """A stub on a channel of its own: TLS trusting ca (serve's CA by
        default), presenting the client certificate client ("client" or
        "foreign"), sending token as grpc's access-token credentials."""
        f = self.f
        key = cert = None
        if client:
            key, cert = read(f[client + "_key"]), read(f[client + "_cert"])
        creds = grpc.ssl_channel_credentials(read(ca or f["ca"]), key, cert)
        if token is not None:
            creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
        ch = grpc.secure_channel(self.s.addr, creds)
        self.channels.append(ch)
        return rpc.URLFrontierStub(ch)

    def code(self, call):
        """The call's refusal code, or ALLOWED: any answer past the
        checks (NOT_FOUND for a crawl not there is an answer)."""
        try:
            call()
            return ALLOWED
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAVAILABLE):
                return e.code()
            return ALLOWED

    def calls(self, stub):
        """One call of each role: GetStats and ListURLs (read), PutURLs
        and GetURLs (crawl), SetDelay and DeleteCrawl (admin)."""
        c = "secured"
        get = pb.GetParams(crawlID=c, max_urls_per_queue=1)
        return [
            self.code(lambda: stub.GetStats(pb.QueueWithinCrawlParams(crawlID=c), timeout=10)),
            self.code(lambda: list(stub.ListURLs(pb.ListUrlParams(crawlID=c), timeout=10))),
            self.code(lambda: list(stub.PutURLs(iter([disc("https://secured.example/", c)]), timeout=10))),
            self.code(lambda: list(stub.GetURLs(get, timeout=10))),
            self.code(lambda: stub.SetDelay(pb.QueueDelayParams(key="", delay_requestable=0, crawlID=c), timeout=10)),
            self.code(lambda: stub.DeleteCrawl(pb.DeleteCrawlMessage(value="secured-other"), timeout=10)),
        ]

    def test_roles(self):
        S = grpc.StatusCode
        ok, unauth, denied = ALLOWED, S.UNAUTHENTICATED, S.PERMISSION_DENIED
        f = self.f
        cases = [
            ("no token", self.stub(), [unauth] * 6),
            ("read token", self.stub(f["read"]), [ok, ok, denied, denied, denied, denied]),
            ("crawl token", self.stub(f["crawl"]), [ok, ok, ok, ok, denied, denied]),
            ("admin token", self.stub(f["admin"]), [ok] * 6),
            ("unknown token", self.stub("not-a-token-0123456789"), [unauth] * 6),
            ("malformed token", self.stub("bad token"), [unauth] * 6),
            ("oversized token", self.stub("x" * 4096), [unauth] * 6),
            ("crawl certificate", self.stub(client="client"), [ok, ok, ok, ok, denied, denied]),
            ("crawl certificate, admin token", self.stub(f["admin"], client="client"), [ok] * 6),
        ]
        for name, stub, want in cases:
            with self.subTest(name):
                self.assertEqual(self.calls(stub), want)

    def test_rotation_on_a_connected_channel(self):
        """A token rotated in the tokens file is taken on a channel that
        stays connected, and the old one refused; then rotated back."""
        f = self.f
        stub = self.stub()  # no call credentials: each call sends its own
        stats = lambda tok: self.code(lambda: stub.GetStats(
            pb.QueueWithinCrawlParams(), metadata=(("authorization", "Bearer " + tok),), timeout=10))
        self.assertEqual(stats(f["read"]), ALLOWED)
        original = read(f["tokens"]).decode()
        rotated = "python-rotated-0123456789"

        def write(text):
            tmp = f["tokens"] + ".py"
            with open(tmp, "w") as out:
                out.write(text)
            os.replace(tmp, f["tokens"])  # a reader sees the old file or the new one

        write(original.replace(f["read"], rotated))
        try:
            eventually("the rotated token", lambda: stats(rotated) == ALLOWED, timeout=15)
            self.assertEqual(stats(f["read"]), grpc.StatusCode.UNAUTHENTICATED)
        finally:
            write(original)
        eventually("the token rotated back", lambda: stats(f["read"]) == ALLOWED, timeout=15)

    def test_bad_tls_refused_in_handshake(self):
        f = self.f
        plain = grpc.insecure_channel(self.s.addr)
        self.channels.append(plain)
        cases = [
            ("plain text", rpc.URLFrontierStub(plain)),
            ("client trusting another CA", self.stub(f["admin"], ca=f["foreign_ca"])),
            ("client certificate of another CA", self.stub(f["admin"], client="foreign")),
        ]
        for name, stub in cases:
            with self.subTest(name):
                self.assertEqual(self.code(lambda: stub.GetStats(pb.QueueWithinCrawlParams(), timeout=5)),
                                 grpc.StatusCode.UNAVAILABLE)
        # and serve goes on answering the others
        self.assertEqual(self.code(lambda: self.stub(f["read"]).GetStats(pb.QueueWithinCrawlParams(), timeout=10)),
                         ALLOWED)


if __name__ == "__main__":
    unittest.main(verbosity=2)
