package normalize

import (
	"testing"

	"github.com/PuerkitoBio/purell"
)

// purellFlags are purell's flags for the rules Sieve shares with it (see
// "Relation to purell" in the package documentation).
const purellFlags = purell.FlagsSafe | purell.FlagRemoveDotSegments | purell.FlagRemoveFragment |
	purell.FlagSortQuery | purell.FlagRemoveEmptyPortSeparator |
	purell.FlagDecodeDWORDHost | purell.FlagDecodeOctalHost | purell.FlagDecodeHexHost

// TestPurell checks the purell column of the policy table: where it is "=",
// purell gives Sieve's answer (the rule is purell's); elsewhere purell gives
// the stated, different answer (a documented departure).
func TestPurell(t *testing.T) {
	for _, c := range policyCases {
		if c.purell == "" {
			continue
		}
		want := c.purell
		if want == "=" {
			want = c.want
		}
		got, err := purell.NormalizeURLString(c.in, purellFlags)
		if err != nil || got != want {
			t.Errorf("purell.NormalizeURLString(%q) = %q, %v, want %q", c.in, got, err, want)
		}
	}
}
