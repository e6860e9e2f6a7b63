package dedup

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// redisMeta is the metadata of a Redis-backed filter: its parameters as
// ordered (field, value) pairs, kept in one Redis hash next to the filter.
// The fields are a storage format: each filter kind pins its layout in a
// test. The field "policy" is special: it may change when opened with Force.
type redisMeta struct {
	key    string // the hash's Redis key
	name   string // the filter's name, for errors
	fields []redisMetaField
}

// redisMetaField is one stored parameter, formatted as it is stored.
type redisMetaField struct {
	Name, Value string
}

// redisMetaPolicy names the field that holds Options.Policy.
const redisMetaPolicy = "policy"

// redisMetaScript creates the metadata hash if it does not exist and
// otherwise returns what it holds, in one atomic step: of two processes
// opening a new filter at once with different parameters, exactly one
// creates it and the other is compared against it.
//
// KEYS[1] is the hash; ARGV holds field, value, field, value, ...
// The reply is an empty array when the hash was created, else HGETALL.
var redisMetaScript = newRedisScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV))
  return {}
end
return redis.call('HGETALL', KEYS[1])
`)

// openWithMeta opens the Redis filter name described by its metadata: it
// reads the stored fields (nil: no filter), has build make the filter of
// them (adopting the stored value of each option left zero) with the fields
// it stores, and checks them against the stored ones (existing: a missing
// filter is ErrNotFound, nothing is written) or creates or checks the
// metadata (ensure). A filter created by another process between the read
// and the creation is built again, from its fields.
func openWithMeta[F any](ctx context.Context, client redis.UniversalClient, name string, existing, force bool,
	build func(stored map[string]string) (F, []redisMetaField, error)) (F, error) {
	var zero F
	if err := CheckRedis(ctx, client); err != nil {
		return zero, err
	}
	meta := redisMeta{key: redisShards{name: name}.metaKey(), name: name}
	for attempt := 0; ; attempt++ {
		stored, err := meta.read(ctx, client)
		if err != nil {
			return zero, err
		}
		if stored == nil && existing {
			return zero, ErrNotFound
		}
		f, fields, err := build(stored)
		if err != nil {
			return zero, err
		}
		meta.fields = fields
		if existing {
			_, err = meta.check(stored, false)
		} else {
			_, err = meta.ensure(ctx, client, force)
		}
		var me *MismatchError
		if stored == nil && attempt == 0 && errors.As(err, &me) {
			continue
		}
		if err != nil {
			return zero, err
		}
		return f, nil
	}
}

// read returns the stored fields, or nil if the filter does not exist. It
// writes nothing.
func (m redisMeta) read(ctx context.Context, c redis.UniversalClient) (map[string]string, error) {
	stored, err := c.HGetAll(ctx, m.key).Result()
	if err != nil {
		return nil, fmt.Errorf("read metadata %s: %w", m.key, err)
	}
	if len(stored) == 0 {
		return nil, nil
	}
	return stored, nil
}

// ensure creates the metadata or checks it against the stored one (see
// check); a differing policy accepted with force then replaces the stored
// one. It reports whether the filter was created.
func (m redisMeta) ensure(ctx context.Context, c redis.UniversalClient, force bool) (created bool, err error) {
	args := make([]any, 0, 2*len(m.fields))
	for _, f := range m.fields {
		args = append(args, f.Name, f.Value)
	}
	replies, err := redisMetaScript.run(ctx, c, []redisCall{{keys: []string{m.key}, args: args}})
	if err != nil {
		return false, fmt.Errorf("open metadata %s: %w", m.key, err)
	}
	flat, ok := replies[0].([]any)
	if !ok || len(flat)%2 != 0 {
		return false, fmt.Errorf("open metadata %s: unexpected reply %T", m.key, replies[0])
	}
	if len(flat) == 0 {
		return true, nil
	}
	stored := make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		stored[k] = v
	}
	newPolicy, err := m.check(stored, force)
	if err != nil || !newPolicy {
		return false, err
	}
	for _, f := range m.fields {
		if f.Name == redisMetaPolicy {
			if err := c.HSet(ctx, m.key, f.Name, f.Value).Err(); err != nil {
				return false, fmt.Errorf("replace policy in %s: %w", m.key, err)
			}
		}
	}
	return false, nil
}

// check compares the stored fields with m's. A stored field that differs,
// or is missing, or is stored but not given, is a *MismatchError naming it;
// a differing policy is accepted with force (newPolicy reports it).
func (m redisMeta) check(stored map[string]string, force bool) (newPolicy bool, err error) {
	stored = maps.Clone(stored)
	for _, f := range m.fields {
		v, ok := stored[f.Name]
		if !ok {
			v = "(missing)"
		}
		delete(stored, f.Name)
		if v == f.Value {
			continue
		}
		if f.Name == redisMetaPolicy && ok && force {
			newPolicy = true
			continue
		}
		return false, &MismatchError{Name: m.name, Field: f.Name, Stored: v, Given: f.Value}
	}
	for k, v := range stored { // a field this version does not know
		return false, &MismatchError{Name: m.name, Field: k, Stored: v, Given: "(unknown)"}
	}
	return newPolicy, nil
}

// storedParam is an option that takes the stored field name when zero.
type storedParam struct {
	name string
	dst  any // *int, *int64 or *float64
}

// adoptStored sets each parameter's option to its stored field when the
// option is zero and the field is stored: an option left zero takes the
// existing filter's value.
func adoptStored(stored map[string]string, params ...storedParam) error {
	for _, p := range params {
		s, ok := stored[p.name]
		if !ok {
			continue
		}
		var err error
		switch d := p.dst.(type) {
		case *int:
			if *d == 0 {
				*d, err = strconv.Atoi(s)
			}
		case *int64:
			if *d == 0 {
				*d, err = strconv.ParseInt(s, 10, 64)
			}
		case *float64:
			if *d == 0 {
				*d, err = strconv.ParseFloat(s, 64)
			}
		default:
			panic(fmt.Sprintf("dedup: adoptStored of %T", p.dst)) // programming error
		}
		if err != nil {
			return fmt.Errorf("%w: stored %s=%q: %w", ErrCorrupt, p.name, s, err)
		}
	}
	return nil
}

// StoredRedisKind returns the kind ("bloom" or "cuckoo") of the filter
// named name in Redis, as its metadata records it, or "" if there is no such
// filter ("unknown" for metadata without a kind). It writes nothing.
func StoredRedisKind(ctx context.Context, client redis.UniversalClient, name string) (string, error) {
	return redisMeta{key: redisShards{name: name}.metaKey(), name: name}.kind(ctx, client)
}

// kind returns the kind the metadata records, "unknown" if it records
// none, or "" if there is no metadata. It writes nothing.
func (m redisMeta) kind(ctx context.Context, client redis.UniversalClient) (string, error) {
	stored, err := m.read(ctx, client)
	switch {
	case err != nil:
		return "", fmt.Errorf("dedup: %w", err)
	case stored == nil:
		return "", nil
	case stored["kind"] == "":
		return "unknown", nil
	}
	return stored["kind"], nil
}
