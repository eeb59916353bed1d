// Package cniplugin is nicpool's CNI IPAM plugin: it turns each CNI verb (ADD, DEL,
// CHECK, GC, STATUS) into one call to ipamd on its unix socket and ipamd's answer into
// a CNI result or a CNI error.
//
// It knows no Kubernetes API and allocates nothing itself, so the binary that runs it
// stays small and starts fast; every decision about addresses is ipamd's.
//
// # Network configuration
//
// The ipam section uses spiderpool's key names, so a spiderpool network changes only
// its type:
//
//	"ipam": {
//	  "type": "nicpool",
//	  "ipam_unix_socket_path": "/run/nicpool/ipamd.sock",  // default
//	  "default_ipv4_ippool": ["default-v4"],               // or one name
//	  "default_ipv6_ippool": ["default-v6"],
//	  "clean_gateway": false,        // true: no default route unless the pod's selection says otherwise
//	  "request_timeout": "30s",      // each call to ipamd; or a number of seconds; 1s to 5m
//	  "log_file_path": "/var/log/nicpool/cni.log",         // default: stderr
//	  "log_level": "info"            // debug, info, warn, error (any case)
//	}
//
// Other keys (spiderpool's log rotation settings among them) are ignored.
//
// # Errors
//
// Every failure is a CNI error whose message says what to do. ipamd's codes pass
// through (11 try again later, 7 invalid configuration, 101 pool exhausted, 102 no
// pool); an unreachable ipamd is 11 (50 for STATUS); CHECK adds 110 (reservation
// missing) and 111 (reservation differs from prevResult). DEL succeeds when ipamd does
// not know the container or pod (code 3).
package cniplugin
