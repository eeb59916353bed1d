package cni

import (
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// appendResult appends result as the CNI library prints it in cniVersion (indented
// JSON, byte for byte: TestPrintMatchesTheCNILibrary), for the results BuildResult
// makes: addresses with gateways, routes with a gateway, nothing else. It reports
// false for any other result or version, which Print leaves to the library. The
// library converts and prints through encoding/json's reflection, which the plugin,
// one process per CNI call, would pay for at every ADD.
func appendResult(b []byte, result types.Result, cniVersion string) ([]byte, bool) {
	r, ok := result.(*current.Result)
	var legacy bool // the 0.3.0-0.4.0 layout: each address says its IP version, dns is always there
	switch cniVersion {
	case "0.3.0", "0.3.1", "0.4.0":
		legacy = true
	case "1.0.0", "1.1.0":
	default:
		ok = false
	}
	if !ok || len(r.Interfaces) > 0 || !r.DNS.IsEmpty() {
		return nil, false
	}
	for _, ip := range r.IPs {
		if ip == nil || ip.Interface != nil {
			return nil, false
		}
	}
	for _, rt := range r.Routes {
		if rt == nil || rt.MTU != 0 || rt.AdvMSS != 0 || rt.Priority != 0 || rt.Table != nil || rt.Scope != nil {
			return nil, false
		}
	}
	b = append(b, "{\n    \"cniVersion\": "...)
	b = appendQuoted(b, cniVersion)
	if len(r.IPs) > 0 {
		b = append(b, ",\n    \"ips\": ["...)
		for i, ip := range r.IPs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, "\n        {"...)
			sep := "\n            "
			if legacy {
				v := "6"
				if ip.Address.IP.To4() != nil {
					v = "4"
				}
				b = appendQuoted(append(b, sep+`"version": `...), v)
				sep = ",\n            "
			}
			b = appendQuoted(append(b, sep+`"address": `...), ip.Address.String())
			if ip.Gateway != nil {
				b = appendQuoted(append(b, ",\n            \"gateway\": "...), ip.Gateway.String())
			}
			b = append(b, "\n        }"...)
		}
		b = append(b, "\n    ]"...)
	}
	if len(r.Routes) > 0 {
		b = append(b, ",\n    \"routes\": ["...)
		for i, rt := range r.Routes {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendQuoted(append(b, "\n        {\n            \"dst\": "...), rt.Dst.String())
			if rt.GW != nil {
				b = appendQuoted(append(b, ",\n            \"gw\": "...), rt.GW.String())
			}
			b = append(b, "\n        }"...)
		}
		b = append(b, "\n    ]"...)
	}
	if legacy {
		b = append(b, ",\n    \"dns\": {}"...)
	}
	return append(b, "\n}"...), true
}

// appendQuoted appends s, which holds no character JSON escapes (versions, addresses).
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
