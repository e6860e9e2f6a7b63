package urlfrontier

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// indexTurns builds the ready queues' index (N keys, and C keys naming
// each partition's crawls) of the partitions not marked indexed, which a
// store of format 2 lacks, once the store has caught up with its log: it reads every queue's state once, then writes each
// queue's turn (updateTx.finish) in entries of indexBatch queues, and
// marks each partition indexed (its I key) last, so that a server stopped
// midway builds it again at its next start. A new store's partitions are
// marked at once. Queues written later by a server of format 2 (in a
// rolling upgrade) are indexed as they are applied (reindex).
func (s *Server) indexTurns(ctx context.Context) error {
	var parts []int
	for p := range Partitions {
		if _, ok, err := s.q.st.Get(indexedKey(p)); err != nil {
			return fmt.Errorf("urlfrontier: index the ready queues: %w", err)
		} else if !ok {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	start := time.Now()
	todo := map[int][][2]string{}
	want := map[int]bool{}
	for _, p := range parts {
		want[p] = true
	}
	err := s.q.st.Scan([]byte{kindQueue}, func(k, v []byte) bool {
		p, hasQueue, ok := parseKey(k)
		if !ok || !hasQueue || len(p.rest) != 0 || !want[p.part] {
			return true
		}
		todo[p.part] = append(todo[p.part], [2]string{p.crawl, p.queue})
		return true
	})
	if err != nil {
		return fmt.Errorf("urlfrontier: index the ready queues: %w", err)
	}
	var n atomic.Int64
	err = parallel(len(parts), func(i int) error {
		p := parts[i]
		qs := todo[p]
		for {
			batch := qs[:min(indexBatch, len(qs))]
			qs = qs[len(batch):]
			last := len(qs) == 0
			err := s.q.update(ctx, p, maxEntryBytes, func(u *updateTx) error {
				for _, q := range batch {
					st, err := u.queue(q[0], q[1])
					if err != nil {
						return err
					}
					u.set(st)
					u.b.Set(crawlPrefix(kindCrawl, q[0], p), nil)
				}
				if last {
					u.b.Set(indexedKey(p), nil)
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("urlfrontier: index the ready queues of partition %d: %w", p, err)
			}
			n.Add(int64(len(batch)))
			if last {
				return nil
			}
		}
	})
	if err != nil {
		return err
	}
	if n.Load() > 0 {
		s.o.Logger.Info("urlfrontier: indexed the ready queues of a store of format 2", "queues", n.Load(), "elapsed", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// indexBatch is how many queues one entry of indexTurns indexes.
const indexBatch = 500

// reindex writes again, with their turns, the queues whose states a
// server of format 2 wrote after this one started (onApply sends them),
// until ctx ends.
func (s *Server) reindex(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case q := <-s.q.stale:
			err := s.q.update(ctx, partOf(q[0], q[1]), smallUpdate, func(u *updateTx) error {
				st, err := u.queue(q[0], q[1])
				if err == nil && st.stored() {
					u.set(st)
					u.b.Set(crawlPrefix(kindCrawl, q[0], partOf(q[0], q[1])), nil)
				}
				return err
			})
			if err != nil && ctx.Err() == nil {
				s.o.Logger.Warn("urlfrontier: index a queue written by an older server", "crawl", q[0], "queue", q[1], "error", err)
			}
		}
	}
}
