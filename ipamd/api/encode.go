package api

import "unicode/utf8"

// The client writes its requests by hand rather than through encoding/json: the CNI
// plugin sends one request per process, and encoding/json's first use of a type
// (working out its fields by reflection) was a noticeable part of the plugin's CPU.
// The bytes are json.Marshal's (TestRequestEncoding holds every request type to it),
// and ipamd decodes them with encoding/json as before.

// request is a request body the client can send.
type request interface {
	appendJSON(b []byte) []byte
}

// appendString appends s as a JSON string escaped as encoding/json escapes it:
// quote, backslash, control characters, the HTML-sensitive <, > and &, U+2028 and
// U+2029 are escaped, and each invalid UTF-8 byte becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

func appendKey(b []byte, key string) []byte {
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendStrings(b []byte, list []string) []byte {
	if list == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendFields appends the attachment's fields, without braces, as an embedded struct's.
func (a Attachment) appendFields(b []byte) []byte {
	b = appendString(appendKey(b, "containerID"), a.ContainerID)
	return appendString(appendKey(append(b, ','), "interface"), a.Interface)
}

func (a Attachment) appendJSON(b []byte) []byte {
	return append(a.appendFields(append(b, '{')), '}')
}

func (p Pod) appendJSON(b []byte) []byte {
	b = appendString(appendKey(append(b, '{'), "namespace"), p.Namespace)
	b = appendString(appendKey(append(b, ','), "name"), p.Name)
	if p.UID != "" {
		b = appendString(appendKey(append(b, ','), "uid"), p.UID)
	}
	return append(b, '}')
}

func (n NetworkConfig) appendJSON(b []byte) []byte {
	b = appendString(appendKey(append(b, '{'), "name"), n.Name)
	if len(n.DefaultIPv4Pools) > 0 {
		b = appendStrings(appendKey(append(b, ','), "defaultIPv4Pools"), n.DefaultIPv4Pools)
	}
	if len(n.DefaultIPv6Pools) > 0 {
		b = appendStrings(appendKey(append(b, ','), "defaultIPv6Pools"), n.DefaultIPv6Pools)
	}
	if n.CleanGateway {
		b = append(appendKey(append(b, ','), "cleanGateway"), "true"...)
	}
	return append(b, '}')
}

// appendPodNetwork appends the "pod" and "network" members every per-pod request ends with.
func appendPodNetwork(b []byte, p Pod, n NetworkConfig) []byte {
	b = p.appendJSON(appendKey(append(b, ','), "pod"))
	return n.appendJSON(appendKey(append(b, ','), "network"))
}

func (r *AllocateRequest) appendJSON(b []byte) []byte {
	b = r.appendFields(append(b, '{'))
	if r.NetNS != "" {
		b = appendString(appendKey(append(b, ','), "netns"), r.NetNS)
	}
	return append(appendPodNetwork(b, r.Pod, r.Network), '}')
}

func (r *ReleaseRequest) appendJSON(b []byte) []byte {
	b = r.appendFields(append(b, '{'))
	return append(appendPodNetwork(b, r.Pod, r.Network), '}')
}

func (r *CheckRequest) appendJSON(b []byte) []byte {
	b = r.appendFields(append(b, '{'))
	return append(appendPodNetwork(b, r.Pod, r.Network), '}')
}

func (r *GCRequest) appendJSON(b []byte) []byte {
	b = r.Network.appendJSON(appendKey(append(b, '{'), "network"))
	b = appendKey(append(b, ','), "validAttachments")
	if r.ValidAttachments == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, a := range r.ValidAttachments {
			if i > 0 {
				b = append(b, ',')
			}
			b = a.appendJSON(b)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func (r *StatusRequest) appendJSON(b []byte) []byte {
	return append(r.Network.appendJSON(appendKey(append(b, '{'), "network")), '}')
}
