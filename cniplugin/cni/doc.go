// Package cni is the logic of nicpool's CNI IPAM plugin, as a library: it turns each
// CNI verb (ADD, DEL, CHECK, GC, STATUS) into one call to ipamd's service (the IPAMD
// interface) and its answer into a CNI result or a CNI error, after the checks skel
// makes of every CNI call (Serve; TestServeAnswersAsSkel holds them to skel's).
//
// Two callers run it, as multus's shim and daemon both run its pkg/multus, and every
// call reaches ipamd one way, as a frame (ipamd/api) on its socket:
//
//   - ipamd (ipamd/server), for every frame: the frame gives the environment, stdin,
//     the caller's name, pid and its finding about CNI_NETNS; ipamd's own service is
//     the IPAMD, and the answer is what the plugin printed (Serve).
//   - nicpool-cni's process (package cniplugin, cmd/nicpool-cni), for a call the
//     front hands off or a runtime makes of it directly, with its own stdout, stderr,
//     environment and network namespace (Relay): it makes the same checks, does what
//     ipamd does not (opens log_file_path, parses a configuration of any size,
//     reaches the socket the configuration names), and sends ipamd the call with the
//     configuration trimmed to the keys the verb reads (Config.Trimmed); ipamd's
//     answer is printed, its log lines written to the log. DEL's wait for an
//     unreachable ipamd is the relay's.
//
// Everything a call needs from where it runs is a field of Plugin; the library itself
// reaches no process (the layering test holds it to that), so the same code answers
// the same call the same way in both. A field that cannot serve a call as
// nicpool-cni's process would (ipamd appends to no host log file and reaches no other
// socket) answers a *HandOff, which ends the call before ipamd is asked anything; the
// front then runs nicpool-cni for it.
//
// It knows no Kubernetes API and allocates nothing itself; every decision about
// addresses is ipamd's.
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
package cni
