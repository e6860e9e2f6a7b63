package frontier_test

import (
	"fmt"

	"github.com/sievecrawl/sieve/frontier"
)

func ExampleTopology() {
	topo := frontier.Topology{Partitions: 16}
	p := topo.Partition("example.com")
	fmt.Println(topo.DiscoveredSubject("default"))
	fmt.Println(topo.FrontierSubject("default", p))
	fmt.Println(topo.PartitionFilter(p))
	fmt.Println(topo.DiscoveredStream(), topo.FrontierStream(), topo.Consumer())
	// Output:
	// sieve.discovered.default
	// sieve.frontier.default.6
	// sieve.frontier.*.6
	// SIEVE_DISCOVERED SIEVE_FRONTIER sieve-dedup
}

func ExampleDiscovered_Encode() {
	d := frontier.Discovered{
		Crawl: "default",
		URL:   "https://example.com/blog/",
		Depth: 1,
		Links: []string{"post-1.html", "/about#team", "mailto:me@example.com"},
	}
	data, _ := d.Encode()
	fmt.Println(string(data))
	back, err := frontier.DecodeDiscovered(data, frontier.Limits{})
	fmt.Println(back.LinkDepth(), len(back.Links), err)
	// Output:
	// {"v":2,"crawl":"default","url":"https://example.com/blog/","depth":1,"links":["post-1.html","/about#team","mailto:me@example.com"]}
	// 2 3 <nil>
}

func ExampleMsgID() {
	fmt.Println(frontier.MsgID("https://example.com/"))
	// Output: DxFdsGK3wN0DCxaHjJnepQ
}
