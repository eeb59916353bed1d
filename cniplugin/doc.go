// Package cniplugin is nicpool's CNI IPAM plugin: it turns each CNI verb (ADD, DEL,
// CHECK, GC, STATUS) into one call to ipamd on its unix socket and ipamd's answer into
// a CNI result or a CNI error.
//
// It knows no Kubernetes API and allocates nothing itself, so the binary that runs it
// stays small and starts fast; every decision about addresses is ipamd's.
//
// # The front and nicpool-cni
//
// Two binaries are installed side by side in the node's CNI bin directory:
//
//   - nicpool (and its copy spiderpool) is the front, cniplugin/front/nicpool.c: a
//     C program with no language runtime, static against musl. The runtime starts
//     a plugin for every CNI call, and starting Go's runtime costs more CPU than the
//     call itself (an empty Go program costs about five times the whole front;
//     ipamd/README has the figures).
//   - nicpool-cni is this package's binary (cmd/nicpool-cni).
//
// For every verb but VERSION, the front reads stdin (up to 64 KiB, api.MaxConfig) and the CNI_*
// variables (up to 16 KiB each), finds out whether CNI_NETNS is its own network
// namespace, and sends it all as a frame of netstrings to ipamd's default socket
// (RunDir/ipamd.sock, reached as the plugin reaches it, following no symlink) at
// POST /v1/cni. ipamd runs this package's code on it (ServeForwarded), with itself as
// the plugin's ipamd, and answers what nicpool-cni would have printed on stdout and
// stderr and its exit code; the front prints them and exits with it. The front parses
// nothing a network configuration or a pod wrote: it copies bytes into the frame, and
// scans the configuration only for the value of request_timeout, its deadline (a call
// ipamd does not answer by then fails with code 11, 50 for STATUS; a DEL waits at most
// 5 s and is then handed off; docs/cni-plugin.md).
//
// Whenever the front cannot finish a call that way, it hands it off: it runs
// nicpool-cni, beside its own executable, with the same arguments, environment and
// stdin, and nicpool-cni serves the call as described in the rest of this page. That is
// the case for VERSION; for larger input (ipamd parses no more, and hands back a larger
// call of an older front); when there is no socket, ipamd refuses the
// connection, drops it or answers anything but a complete 200 (an ipamd older than
// the front answers 404); and when ipamd declines the call, which it does for a
// network that names log_file_path (a host file the plugin appends to itself) or a
// socket other than the default. A call handed off after ipamd ran it is run again,
// which every verb allows (a repeated ADD answers the same addresses). A network with
// log_file_path therefore costs a run of nicpool-cni on every call.
//
// # Network configuration
//
// The ipam section uses spiderpool's key names, so a spiderpool network changes only
// its type (or none: the binary is also installed as spiderpool, see below):
//
//	"ipam": {
//	  "type": "nicpool",
//	  "ipam_unix_socket_path": "/run/nicpool/ipamd.sock",  // default; must be beneath /run/nicpool
//	  "default_ipv4_ippool": ["default-v4"],               // or one name
//	  "default_ipv6_ippool": ["default-v6"],
//	  "clean_gateway": false,        // true: no default route unless the pod's selection says otherwise
//	  "request_timeout": "2m",       // each call to ipamd; or a number of seconds; 1s to 5m
//	  "log_file_path": "/var/log/nicpool/cni.log",         // default: stderr; must be beneath /var/log/nicpool
//	  "log_level": "info"            // debug, info, warn or error (any case)
//	}
//
// Other keys are ignored, spiderpool's log rotation keys (log_file_max_size,
// log_file_max_age, log_file_max_count) among them: the plugin renames its log to
// ".1" beside it past 10 MiB. spiderpool's match_master_subnet is refused when true.
//
// # Paths
//
// A network configuration is written by whoever may create a
// NetworkAttachmentDefinition and read by a plugin the runtime runs as root, so the
// two paths it may name are confined: ipam_unix_socket_path to a file beneath RunDir
// (/run/nicpool), log_file_path to a file beneath LogDir (/var/log/nicpool). Any other
// path is refused on its text, before any file is touched. Inside the directories no
// symlink is followed: each component is opened with O_NOFOLLOW from the directory
// down, the socket is connected to through the descriptor that was checked to be a
// socket, and the log must be a regular file with a single link (a FIFO or a directory
// is refused too). log_file_path names a file in LogDir or in one subdirectory of it,
// which is created when missing (a deeper path is refused); the log is rotated in
// its own directory. A refusal is CNI error 7 naming the key. ADD, CHECK, GC and
// STATUS fail with it; DEL, which must let a pod go, does without the key (logging to
// stderr, or leaving the release to the garbage collector). spiderpool's default
// paths (/var/run/spidernet/spiderpool.sock, /var/log/spidernet/spiderpool.log) read
// as if the key were absent.
//
// The environment variables EnvRunDir and EnvLogDir say where the two directories are
// on the host when they are elsewhere (tests, several node stand-ins on one host);
// configurations still name paths beneath /run/nicpool and /var/log/nicpool. The
// environment is the container runtime's: no network configuration or pod can set it.
//
// # DEL while ipamd is unreachable
//
// When ipamd cannot be reached (no socket, connection refused or dropped, no answer),
// DEL tries again for up to DelWait (5 s, or request_timeout when shorter), then
// succeeds and logs that the release is left to the garbage collector: a pod deleted
// during an ipamd rollout or after an uninstall must not hang in Terminating. The
// collector releases the addresses of deleted pods, of StatefulSet ordinals scaled
// away, and keeps those of an ordinal that returns. When ipamd answers with an error
// (code 11 while its caches sync), DEL fails and the runtime retries. ADD, CHECK and
// GC with ipamd unreachable fail with code 11, STATUS with 50.
//
// # The spiderpool name
//
// The same binary is installed as spiderpool (ipamd's DaemonSet does it), so networks
// whose ipam type is spiderpool, and the DELs runtimes and Multus cached for pods
// created under spiderpool, are served by nicpool. It speaks CNI 0.3.0 as spiderpool
// does, besides 0.3.1 to 1.1.0.
//
// # Errors
//
// Every failure is a CNI error whose message says what to do. ipamd's codes pass
// through (11 try again later, 7 invalid configuration, 101 pool exhausted, 102 no
// pool); an unreachable ipamd is 11 (50 for STATUS); CHECK adds 110 (reservation
// missing) and 111 (reservation differs from prevResult). DEL succeeds when ipamd does
// not know the container or pod (code 3).
package cniplugin
