package strictjson

import (
	"os"
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzParseStrictFast: the quick reader takes only what the token reader
// takes, and reads it to the same values; what the token reader takes,
// the quick one takes too.
func FuzzParseStrictFast(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":1,"b":[1,2,{"a":"x"}]}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"b":1},"b":{"b":2}}`,
		`{"k":"\ud800"}`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`, `{"a":1} x`, ` "s" `, `-0.5e3`,
		`{"a0":0,"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"b0":0,"b1":1,"b2":2,"b3":3,"b4":4,"b5":5,"b6":6,"a3":7}`,
	} {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile("../wire/testdata/status-reply-100.json"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) {
			return // Parse refuses it before either reader
		}
		slow, serr := parseSlow(data)
		fast, ok := parseFast(data)
		switch {
		case ok && serr != nil:
			t.Fatalf("the quick reader takes %q, which the token reader refuses: %v", data, serr)
		case !ok && serr == nil:
			t.Fatalf("the quick reader leaves %q, which the token reader takes", data)
		case ok && !reflect.DeepEqual(slow, fast):
			t.Fatalf("%q reads differently:\n%#v\n%#v", data, slow, fast)
		}
	})
}
