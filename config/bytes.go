package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Bytes is a size in bytes. It parses plain numbers and the suffixes B, KB,
// MB, GB, TB (powers of 1000) and KiB, MiB, GiB, TiB (powers of 1024); -1
// means unlimited where a setting says so.
type Bytes int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30},
	{"B", 1},
}

// ParseBytes parses a size such as "1048576", "1MiB" or "64 KB".
func ParseBytes(s string) (Bytes, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if len(t) > len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			// "KiB" must not match as "B" with a number "1Ki": units are
			// ordered longest first, so the first match is the right one.
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q (want e.g. 1048576, 512KiB, 1MiB, 8GiB)", s)
	}
	if n < 0 {
		if n == -1 && mult == 1 {
			return -1, nil
		}
		return 0, fmt.Errorf("invalid size %q: negative", s)
	}
	if n > 0 && mult > 1 && n > (1<<63-1)/mult {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return Bytes(n * mult), nil
}

// String formats b with the largest binary unit that divides it.
func (b Bytes) String() string {
	if b <= 0 {
		return strconv.FormatInt(int64(b), 10)
	}
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if int64(b)%u.mult == 0 {
			return strconv.FormatInt(int64(b)/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10)
}
