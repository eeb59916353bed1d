package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

// tricky strings: every class of character encoding/json escapes, and invalid UTF-8.
var tricky = []string{"", "plain-name_0.9", "quote\" back\\slash", "ctl\n\r\t\b\f\x00\x1f\x7f", "<script>&amp;</script>", "line\u2028para\u2029", "bad\xff\xfeutf8\xc3", "ünïcødé ✓ \U0001F600 \ufffd"}

// fill sets every field of v (a pointer to a struct), recursively, to a non-zero
// value drawn from seed: a field added to a request type is then encoded, or this
// test fails.
func fill(v reflect.Value, seed int) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), seed)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), seed+i)
		}
	case reflect.String:
		v.SetString(tricky[1+seed%(len(tricky)-1)])
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(v.Index(0), seed+1)
		fill(v.Index(1), seed+2)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(seed + 1))
	default:
		panic("fill: add a case for " + v.Kind().String())
	}
}

// TestRequestEncoding: what the client sends is byte for byte what json.Marshal
// writes for the same request, so ipamd reads every field as before: for requests
// with every field set (each string from a catalogue of characters JSON escapes), for
// zero requests, and for empty lists.
func TestRequestEncoding(t *testing.T) {
	all := []request{&AllocateRequest{}, &ReleaseRequest{}, &CheckRequest{}, &GCRequest{}, &StatusRequest{}}
	for _, proto := range all {
		typ := reflect.TypeOf(proto).Elem()
		cases := map[string]request{"zero": reflect.New(typ).Interface().(request)}
		for seed := range len(tricky) {
			full := reflect.New(typ)
			fill(full.Elem(), seed)
			cases["full/"+string(rune('a'+seed))] = full.Interface().(request)
		}
		empty := reflect.New(typ)
		if f := empty.Elem().FieldByName("ValidAttachments"); f.IsValid() {
			f.Set(reflect.MakeSlice(f.Type(), 0, 0))
		}
		if f := empty.Elem().FieldByName("Network"); f.IsValid() {
			f.Set(reflect.ValueOf(NetworkConfig{Name: "n", DefaultIPv4Pools: []string{}, DefaultIPv6Pools: []string{}}))
		}
		cases["empty lists"] = empty.Interface().(request)
		for name, req := range cases {
			want, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := req.appendJSON(nil); string(got) != string(want) {
				t.Errorf("%s %s:\n got %s\nwant %s", typ.Name(), name, got, want)
			}
		}
	}
}

// FuzzAppendString: any string is escaped as json.Marshal escapes it.
func FuzzAppendString(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); string(got) != string(want) {
			t.Errorf("appendString(%q) = %s, json.Marshal: %s", s, got, want)
		}
	})
}
