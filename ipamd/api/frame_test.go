package api

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// frame writes fields as the front does: "<length>:<bytes>," each.
func frame(fields ...string) []byte {
	var b bytes.Buffer
	for _, f := range fields {
		fmt.Fprintf(&b, "%d:%s,", len(f), f)
	}
	return b.Bytes()
}

// goodFields are a frame's fields for an ADD: name, pid, the CNI_* variables in
// FrameEnv's order, the netns relation, stdin.
func goodFields() []string {
	return []string{"spiderpool", "4242",
		"ADD", "c1", "/var/run/netns/x", "net1", "K8S_POD_NAMESPACE=a;K8S_POD_NAME=b", "/opt/cni/bin", "",
		NetNSOther, `{"cniVersion":"1.1.0","name":"n"}`}
}

func TestDecodeFrame(t *testing.T) {
	f, err := DecodeFrame(frame(goodFields()...))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "spiderpool" || f.PID != 4242 || f.NetNS != NetNSOther || string(f.Stdin) != `{"cniVersion":"1.1.0","name":"n"}` {
		t.Errorf("decoded %+v", f)
	}
	want := map[string]string{"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": "/var/run/netns/x", "CNI_IFNAME": "net1",
		"CNI_ARGS": "K8S_POD_NAMESPACE=a;K8S_POD_NAME=b", "CNI_PATH": "/opt/cni/bin", "CNI_NETNS_OVERRIDE": ""}
	for k, v := range want {
		if f.Env[k] != v {
			t.Errorf("%s = %q, want %q", k, f.Env[k], v)
		}
	}
	// A value may hold anything, the frame's own punctuation included.
	fields := goodFields()
	fields[6] = "a:1,b\x00,9:"
	if f, err := DecodeFrame(frame(fields...)); err != nil || f.Env["CNI_ARGS"] != fields[6] {
		t.Errorf("CNI_ARGS with separators: %+v, %v", f, err)
	}
}

// TestDecodeFrameRefuses: every malformed frame is an error, never a call.
func TestDecodeFrameRefuses(t *testing.T) {
	with := func(i int, v string) []byte {
		f := goodFields()
		f[i] = v
		return frame(f...)
	}
	good := frame(goodFields()...)
	for _, tt := range []struct {
		name  string
		frame []byte
		want  string
	}{
		{"empty", nil, "0 fields"},
		{"one field short", frame(goodFields()[:len(goodFields())-1]...), "10 fields"},
		{"one field more", frame(append(goodFields(), "x")...), "12 fields"},
		{"cut short", good[:len(good)-2], "cut short"},
		{"no closing comma", append(good[:len(good)-1:len(good)-1], '.'), "cut short"},
		{"length longer than the frame", []byte("99:abc,"), "cut short"},
		{"length not a number", []byte("-1:abc,"), "not a number"},
		{"length with a sign", []byte("+3:abc,"), "not a number"},
		{"no length", []byte(":abc,"), "no length"},
		{"length of eleven digits", []byte("12345678901:x,"), "no length"},
		{"pid not a number", with(1, "x"), "pid"},
		{"pid zero", with(1, "0"), "pid"},
		{"netns relation unknown", with(9, "mine"), "netns relation"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := DecodeFrame(tt.frame)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeFrame = %+v, %v; want an error saying %q", f, err, tt.want)
			}
		})
	}
}

// FuzzDecodeFrame: whatever reaches ipamd's /v1/cni, decoding answers a call whose
// fields re-encode to the same frame, or an error; it never panics.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(frame(goodFields()...))
	f.Fuzz(func(t *testing.T, b []byte) {
		fw, err := DecodeFrame(b)
		if err != nil {
			return
		}
		if again, err := DecodeFrame(AppendFrame(nil, fw)); err != nil || fmt.Sprint(again) != fmt.Sprint(fw) {
			t.Errorf("%q decodes to %+v, which re-encodes to %+v, %v", b, fw, again, err)
		}
	})
}

// AppendFrame writes the frame the decoder reads, field for field: the netstrings of
// frame, which spells them out.
func TestAppendFrame(t *testing.T) {
	fields := goodFields()
	f, err := DecodeFrame(frame(fields...))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := AppendFrame(nil, f), frame(fields...); !bytes.Equal(got, want) {
		t.Errorf("AppendFrame:\n%q\nwant\n%q", got, want)
	}
	req := FrameRequest(f)
	head := fmt.Sprintf("POST /v1/cni HTTP/1.0\r\nHost: ipamd\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", len(frame(fields...)))
	if !bytes.Equal(req, append([]byte(head), frame(fields...)...)) {
		t.Errorf("FrameRequest: %q", req)
	}
}
