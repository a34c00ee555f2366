// Package strictjson is the strict JSON reader under every decoder of
// messages: it reads one JSON value refusing duplicate keys, invalid UTF-8,
// trailing data and deep nesting, and reports each refusal as a *FieldError
// naming the field at fault.
package strictjson
