package cni

import (
	"path/filepath"
	"strings"
)

// The only host directories the plugin reaches. A network configuration is written by
// whoever may create a NetworkAttachmentDefinition and read by a plugin running as
// root, so the paths it names are confined to these two, judged here on their text;
// whoever opens them (the process's Opener) follows no symlink inside them.
const (
	// RunDir holds ipamd's socket: ipam_unix_socket_path must name a file beneath it.
	RunDir = "/run/nicpool"
	// LogDir holds the plugin's logs: log_file_path must name a file beneath it.
	LogDir = "/var/log/nicpool"
)

// maxPathLen bounds a configured path (the kernel's PATH_MAX).
const maxPathLen = 4096

// MaxLogName bounds each name of log_file_path beneath LogDir (the kernel's NAME_MAX).
const MaxLogName = 255

// ShallowLogPath reports whether rel, a path beneath LogDir, names a file in LogDir or
// in one subdirectory of it, each name at most MaxLogName bytes. The plugin runs as
// root and creates the subdirectory when it is missing: a deeper path would let a
// network configuration create a directory per component on the filesystem the
// kubelet and the container runtime share, at every call.
func ShallowLogPath(rel string) bool {
	parts := strings.Split(rel, "/")
	if len(parts) > 2 {
		return false
	}
	for _, part := range parts {
		if len(part) > MaxLogName {
			return false
		}
	}
	return true
}

// Beneath returns p relative to dir when p names a file beneath dir, judged on the
// text alone (".." is resolved lexically, which is what the kernel does too once no
// symlink may be followed).
func Beneath(dir, p string) (string, bool) {
	if !filepath.IsAbs(p) || len(p) > maxPathLen {
		return "", false
	}
	rel, ok := strings.CutPrefix(filepath.Clean(p), dir+"/")
	return rel, ok && rel != ""
}

// RefusedPath is a path the plugin will not use: it crosses a symlink, or names
// something other than what its key asks for. It names the path as the configuration
// does. The Opener answers it; the verbs turn it into CNI error 7 naming the key.
type RefusedPath struct{ Path, Why string }

func (e *RefusedPath) Error() string { return e.Path + " " + e.Why }
