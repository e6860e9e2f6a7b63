package frontier_test

import (
	"slices"
	"testing"

	"github.com/sievecrawl/sieve/dust"
	"github.com/sievecrawl/sieve/frontier"
)

// TestCrawlRecordRules pins how `crawler rules veto|pin|unveto|unpin`
// change a crawl record: entries compared as dust.ParseHostRule reads them,
// a pin and a veto of one rule exclusive, and no change reported when there
// is none (so Crawls.Update writes nothing).
func TestCrawlRecordRules(t *testing.T) {
	rule := func(s string) dust.HostRule {
		t.Helper()
		hr, err := dust.ParseHostRule(s)
		if err != nil {
			t.Fatal(err)
		}
		return hr
	}
	type op func(*frontier.CrawlRecord, dust.HostRule) bool
	veto, pin, unveto, unpin := (*frontier.CrawlRecord).Veto, (*frontier.CrawlRecord).Pin, (*frontier.CrawlRecord).Unveto, (*frontier.CrawlRecord).Unpin
	tests := []struct {
		name             string
		pins, vetoes     []string
		do               op
		rule             string
		changed          bool
		wantPin, wantVet []string
	}{
		{"veto new", nil, nil, veto, "shop.example param:zsid", true, nil, []string{"shop.example param:zsid"}},
		// The host's case does not matter: ParseHostRule lowers it.
		{"veto again", nil, []string{"shop.example param:zsid"}, veto, "Shop.Example param:zsid", false, nil, []string{"shop.example param:zsid"}},
		{"veto every host", nil, nil, veto, "* case", true, nil, []string{"* case"}},
		{"veto a pinned rule", []string{"shop.example param:zsid", "shop.example case"}, nil, veto, "shop.example param:zsid", true,
			[]string{"shop.example case"}, []string{"shop.example param:zsid"}},
		{"pin a vetoed rule", nil, []string{"shop.example param:zsid"}, pin, "shop.example param:zsid", true,
			[]string{"shop.example param:zsid"}, nil},
		// A veto of every host is another entry than a pin of one.
		{"pin beside a veto of every host", nil, []string{"* case"}, pin, "a.example case", true, []string{"a.example case"}, []string{"* case"}},
		{"unveto", nil, []string{"a.example case", "b.example case"}, unveto, "a.example case", true, nil, []string{"b.example case"}},
		{"unveto absent", nil, []string{"a.example case"}, unveto, "a.example slash", false, nil, []string{"a.example case"}},
		{"unpin", []string{"a.example ext:.html"}, nil, unpin, "a.example ext:.html", true, nil, nil},
		// An entry that does not parse is left alone.
		{"keeps what it cannot read", []string{"garbage"}, nil, pin, "a.example case", true, []string{"garbage", "a.example case"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := frontier.CrawlRecord{PinRules: slices.Clone(tt.pins), VetoRules: slices.Clone(tt.vetoes)}
			if got := tt.do(&rec, rule(tt.rule)); got != tt.changed {
				t.Errorf("changed = %v, want %v", got, tt.changed)
			}
			if !slices.Equal(rec.PinRules, tt.wantPin) || !slices.Equal(rec.VetoRules, tt.wantVet) {
				t.Errorf("pins %q, vetoes %q; want %q, %q", rec.PinRules, rec.VetoRules, tt.wantPin, tt.wantVet)
			}
		})
	}
}
