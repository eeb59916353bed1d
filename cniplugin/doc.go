// Package cniplugin is nicpool-cni's process: it serves the CNI call the process was
// started for with the plugin's library (package cni, Relay), giving it the process's
// stdout and stderr, its environment and stdin, a log file beneath cni.LogDir and
// ipamd's socket beneath cni.RunDir, both opened following no symlink, and the
// comparison of CNI_NETNS with its own network namespace (Process, Main). The
// configuration, the verbs, the results and the errors are the library's: see its
// package documentation.
//
// It knows no Kubernetes API and allocates nothing itself, so the binary that runs it
// stays small; every decision about addresses is ipamd's.
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
//   - nicpool-cni is this package's binary (cmd/nicpool-cni), the library in a process
//     of its own.
//
// For every verb but VERSION, the front reads stdin (up to 64 KiB, api.MaxConfig)
// and the CNI_* variables (up to 16 KiB each), finds out whether CNI_NETNS is its own network
// namespace, and sends it all as a frame of netstrings to ipamd's default socket
// (RunDir/ipamd.sock, reached as the plugin reaches it, following no symlink) at
// POST /v1/cni. ipamd runs the plugin's library on it (ipamd/server's ServeFrame),
// with its own service as the plugin's ipamd, and answers what nicpool-cni would have
// printed on stdout and stderr and its exit code; the front prints them and exits
// with it. The front parses nothing a network configuration or a pod wrote: it copies bytes into the frame, and
// scans the configuration only for the value of request_timeout, its deadline (a call
// ipamd does not answer by then fails with code 11, 50 for STATUS; a DEL waits at most
// 5 s and is then handed off; docs/cni-plugin.md).
//
// Whenever the front cannot finish a call that way, it hands it off: it runs
// nicpool-cni, beside its own executable, with the same arguments, environment and
// stdin. nicpool-cni makes the library's checks, does what ipamd does not (appends
// to log_file_path, parses the whole configuration, reaches the socket the
// configuration names) and sends ipamd the same kind of frame, whose stdin is the
// configuration trimmed to the keys the verb reads (cni.Config.Trimmed): ipamd runs
// it as it runs the front's, nicpool-cni prints its answer and writes its log lines
// to the log. There is one protocol on the socket. That is the case for VERSION; for larger input (ipamd parses no more, and hands back a larger
// call of an older front); when there is no socket, ipamd refuses the
// connection, drops it or answers anything but a complete 200 (an ipamd older than
// the front answers 404); and when ipamd declines the call, which it does for a
// network that names log_file_path (a host file the plugin appends to itself) or a
// socket other than the default. A call handed off after ipamd ran it is run again,
// which every verb allows (a repeated ADD answers the same addresses). A network with
// log_file_path therefore costs a run of nicpool-cni on every call (and two frames to
// ipamd, the second small).
package cniplugin
