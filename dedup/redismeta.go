package dedup

import (
	"context"
	"fmt"

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

// ensure creates the metadata or checks it against the stored one. A stored
// field that differs, or is missing, or is stored but not given, is a
// *MismatchError naming it; a differing policy is accepted with force, and
// the stored policy is then replaced by the given one. It reports whether
// the filter was created.
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
	newPolicy := false
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
	if newPolicy {
		for _, f := range m.fields {
			if f.Name == redisMetaPolicy {
				if err := c.HSet(ctx, m.key, f.Name, f.Value).Err(); err != nil {
					return false, fmt.Errorf("replace policy in %s: %w", m.key, err)
				}
			}
		}
	}
	return false, nil
}
