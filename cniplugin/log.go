package cniplugin

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/containernetworking/cni/pkg/types"
)

// maxLogSize is when the log file is rotated (to one ".1" backup): every CNI call of
// the node appends to it, and nothing else would ever trim it.
const maxLogSize = 10 << 20

// openLog returns the logger the config asks for and a function that closes its file.
// A log file refused by the path rules is a CNI error naming log_file_path; one that
// cannot be opened for another reason (a full or read-only disk) must not fail the
// CNI call, so the plugin logs to stderr, which runtimes capture. pid is the plugin
// process's (the front's, for a forwarded call).
func openLog(c *Config, plugin string, stderr io.Writer, pid int) (*slog.Logger, func(), *types.Error) {
	w := stderr
	closeFn := func() {}
	var openErr error
	var refused *types.Error
	if c.LogFile != "" {
		rel, _ := beneath(LogDir, c.LogFile)
		f, err := logDir().appendTo(rel)
		var r *refusedPath
		switch {
		case errors.As(err, &r):
			refused = invalidConfig("ipam.log_file_path", fmt.Sprintf("%v: give a regular file beneath %s, or leave the key out to log to stderr", r, LogDir))
		case err != nil:
			openErr = err
		default:
			w, closeFn = f, func() { _ = f.Close() }
		}
	}
	log := slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: c.LogLevel})).With("plugin", plugin, "pid", pid)
	if openErr != nil {
		log.Warn("logging to stderr: cannot open log_file_path", "error", openErr.Error())
	}
	return log, closeFn, refused
}
