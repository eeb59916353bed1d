// Package fronttest holds the tests of the CNI plugin's front, ../nicpool.c:
// the one C file the container runtime execs for every CNI call (installed as nicpool
// and spiderpool), which posts the call to ipamd (POST /v1/cni) and prints ipamd's
// answer, or hands the call to nicpool-cni beside it.
//
// The front is built static against musl and not position independent (the
// Makefile's FRONT_CC and FRONT_CFLAGS), for linux/amd64, arm64, ppc64le and s390x;
// the images carry it for their platforms. One deadline bounds a call whatever ipamd
// does: the network's request_timeout, which the front finds by a bounded scan of the
// configuration; a DEL that ipamd does not answer within 5 s is handed to nicpool-cni.
//
// The tests build the front five ways from the one source (for this machine with
// musl as shipped; as a hosted glibc program under AddressSanitizer and
// UndefinedBehaviorSanitizer; for arm64, ppc64le and s390x with musl, each run under
// qemu-user) and run each against a stand-in ipamd that answers well and badly in
// every way listed in front_test.go, with a stand-in nicpool-cni that shows each
// hand-off.
package fronttest
