package messages

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ocx-go/ocx/messages/strictjson"
)

// A reader takes a block in two passes. strictjson.Parse is the first: one JSON
// value, no key twice, valid UTF-8, bounded depth and size, numbers kept as
// written. Fill is the second: it sets a struct from that tree by the
// struct's own json tags, naming the field at fault (with its list index) in
// every error. Validate comes last. No type has a decoder of its own; a few
// add a rule only the tree can tell (a key's presence) in a Decoded method.
//
// Besides json, a field's tags say:
//
//	why:"..."      the key is required; the words say why when it is missing
//	max:"pid"      a whole number's bound: pid (maxPID) or code (255);
//	               2^53-1 otherwise
//	ocx:"closed"   an object (or each of a list of objects) that refuses a
//	               key it does not know: an unknown key there may be a limit,
//	               which is never silently dropped
//	ocx:"version"  the note's version, read from "version" by readVersion
//	ocx:"empty"    an optional string that may be present and empty
//
// An optional string that is present must otherwise not be empty: a writer
// leaves out what it has not got. A key the struct does not name is left
// alone, as a reader of a newer note does, but for the limit-bearing keys
// decodeTree refuses.
func Fill(o strictjson.Obj, v any) error {
	rv := reflect.ValueOf(v).Elem()
	return fillStruct(o, rv)
}

// decoder is a type with a rule Fill cannot tell from tags alone: Fill
// calls its Decoded after it has set the fields.
type decoder interface {
	Decoded(o strictjson.Obj) error
}

// plan is how Fill reads one struct type: its fields in order, embedded
// structs flattened as encoding/json does.
type plan struct {
	fields []planField
	keys   []string // every key the struct names, for ocx:"closed"
}

type planField struct {
	index    []int
	key      string
	why      string
	required bool
	max      uint64
	closed   bool
	version  bool
	empty    bool
}

var plans sync.Map // reflect.Type → *plan

var timeType = reflect.TypeFor[time.Time]()

func planOf(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	p := &plan{}
	addFields(p, t, nil)
	for _, f := range p.fields {
		if !f.version {
			p.keys = append(p.keys, f.key)
		}
	}
	actual, _ := plans.LoadOrStore(t, p)
	return actual.(*plan)
}

func addFields(p *plan, t reflect.Type, index []int) {
	for i := range t.NumField() {
		sf := t.Field(i)
		idx := append(append([]int(nil), index...), i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
			addFields(p, sf.Type, idx)
			continue
		}
		opts := sf.Tag.Get("ocx")
		if !sf.IsExported() || (name == "-" && opts != "version") {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f := planField{index: idx, key: name, max: strictjson.MaxSafeInt}
		f.why, f.required = sf.Tag.Lookup("why")
		switch m := sf.Tag.Get("max"); m {
		case "":
		case "pid":
			f.max = maxPID
		case "code":
			f.max = 255
		default:
			panic(fmt.Sprintf("messages: field %s.%s: max %q is not pid or code", t, sf.Name, m))
		}
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "":
			case "closed":
				f.closed = true
			case "version":
				f.version = true
			case "empty":
				f.empty = true
			default:
				panic(fmt.Sprintf("messages: field %s.%s: ocx option %q", t, sf.Name, o))
			}
		}
		p.fields = append(p.fields, f)
	}
}

func fillStruct(o strictjson.Obj, rv reflect.Value) error {
	p := planOf(rv.Type())
	for _, f := range p.fields {
		dst := rv.FieldByIndex(f.index)
		if f.version {
			dst.SetInt(int64(versionOf(o)))
			continue
		}
		if err := fillField(o, f, dst); err != nil {
			return err
		}
	}
	if d, ok := rv.Addr().Interface().(decoder); ok {
		return d.Decoded(o)
	}
	return nil
}

// fillField reads one key of o into dst.
func fillField(o strictjson.Obj, f planField, dst reflect.Value) error {
	v, ok := o.Map[f.key]
	if !ok {
		if f.required {
			return o.Missing(f.key, f.why)
		}
		return nil
	}
	t := dst.Type()
	if t.Kind() == reflect.Pointer {
		e := reflect.New(t.Elem())
		if err := fillValue(o, f, v, e.Elem()); err != nil {
			return err
		}
		dst.Set(e)
		return nil
	}
	return fillValue(o, f, v, dst)
}

// fillValue sets dst, a value of the field f, from v, the key's value.
func fillValue(o strictjson.Obj, f planField, v any, dst reflect.Value) error {
	field := o.Field(f.key)
	t := dst.Type()
	switch {
	case t == timeType:
		s, ok := v.(string)
		if !ok {
			return o.WrongType(f.key, "a string", v)
		}
		tm, err := parseUTC(field, s)
		if err != nil {
			return err
		}
		dst.Set(reflect.ValueOf(tm))
		return nil
	case t.Kind() == reflect.String:
		s, ok := v.(string)
		if !ok {
			return o.WrongType(f.key, "a string", v)
		}
		if s == "" && !f.required && !f.empty {
			return strictjson.FieldErr(field, strictjson.ErrInvalid, "is empty; leave the key out instead")
		}
		dst.SetString(s)
		return nil
	case t.Kind() == reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return o.WrongType(f.key, "true or false", v)
		}
		dst.SetBool(b)
		return nil
	case t.Kind() == reflect.Int || t.Kind() == reflect.Uint64:
		num, ok := v.(json.Number)
		if !ok {
			return o.WrongType(f.key, "a whole number", v)
		}
		n, err := strconv.ParseUint(num.String(), 10, 64)
		if err != nil || n > f.max {
			return strictjson.FieldErr(field, strictjson.ErrInvalid, fmt.Sprintf("%s is not a whole number from 0 to %d", strictjson.ShortToken(num.String()), f.max))
		}
		if t.Kind() == reflect.Int {
			dst.SetInt(int64(n))
		} else {
			dst.SetUint(n)
		}
		return nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		a, ok := v.([]any)
		if !ok {
			return o.WrongType(f.key, "a list of strings", v)
		}
		out := reflect.MakeSlice(t, len(a), len(a))
		for i, e := range a {
			s, ok := e.(string)
			if !ok {
				return strictjson.FieldErr(strictjson.IndexField(field, i), strictjson.ErrInvalid, "must be a string, not "+strictjson.JSONType(e))
			}
			out.Index(i).SetString(s)
		}
		dst.Set(out)
		return nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		a, ok := v.([]any)
		if !ok {
			return o.WrongType(f.key, "a list of objects", v)
		}
		out := reflect.MakeSlice(t, len(a), len(a))
		for i, e := range a {
			m, ok := e.(map[string]any)
			if !ok {
				return strictjson.FieldErr(strictjson.IndexField(field, i), strictjson.ErrInvalid, "must be an object, not "+strictjson.JSONType(e))
			}
			in := strictjson.Obj{Path: strictjson.IndexField(field, i), Map: m}
			if f.closed {
				if err := in.OnlyKeys(strictjson.IndexField(f.key, i), planOf(t.Elem()).keys...); err != nil {
					return err
				}
			}
			if err := fillStruct(in, out.Index(i)); err != nil {
				return err
			}
		}
		dst.Set(out)
		return nil
	case t.Kind() == reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return o.WrongType(f.key, "an object", v)
		}
		in := strictjson.Obj{Path: field, Map: m}
		if f.closed {
			if err := in.OnlyKeys(f.key, planOf(t).keys...); err != nil {
				return err
			}
		}
		return fillStruct(in, dst)
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return o.WrongType(f.key, "an object", v)
		}
		in := strictjson.Obj{Path: field, Map: m}
		names := make([]string, 0, len(m))
		for k := range m {
			names = append(names, k)
		}
		sort.Strings(names)
		out := reflect.MakeMapWithSize(t, len(m))
		for _, k := range names {
			em, ok := m[k].(map[string]any)
			if !ok {
				return in.WrongType(k, "an object", m[k])
			}
			e := reflect.New(t.Elem()).Elem()
			if err := fillStruct(strictjson.Obj{Path: in.Field(k), Map: em}, e); err != nil {
				return err
			}
			out.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), e)
		}
		dst.Set(out)
		return nil
	}
	panic(fmt.Sprintf("messages: fill has no reading for %s (key %q)", t, f.key))
}

// FieldKeys lists the keys the json tags of the struct type t name, in
// order, as Fill reads them (the version key aside).
func FieldKeys(t reflect.Type) []string {
	return slices.Clone(planOf(t).keys)
}
