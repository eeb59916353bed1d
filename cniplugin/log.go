package cniplugin

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
)

// maxLogSize is when the log file is rotated (to one ".1" backup): every CNI call of
// the node appends to it, and nothing else would ever trim it.
const maxLogSize = 10 << 20

// openLog returns the logger the config asks for and a function that closes its file.
// A log file that cannot be opened must not fail the CNI call, so it falls back to
// stderr, which runtimes capture.
func openLog(c *Config) (*slog.Logger, func()) {
	var w io.Writer = os.Stderr
	closeFn := func() {}
	if c.LogFile != "" {
		if f, err := openLogFile(c.LogFile); err == nil {
			w, closeFn = f, func() { _ = f.Close() }
		}
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: c.LogLevel})
	return slog.New(h).With("plugin", "nicpool", "pid", os.Getpid()), closeFn
}

func openLogFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if st, err := os.Stat(path); err == nil && st.Size() > maxLogSize {
		// Concurrent plugins may race to rotate; losing a few lines is acceptable.
		_ = os.Rename(path, path+".1")
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
}
