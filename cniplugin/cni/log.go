package cni

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// LogTimeFormat is how every nicpool log line writes its time, under the key "ts":
// RFC 3339 with nanoseconds, as the daemons' zap encoder writes it by default
// (--zap-time-encoding=rfc3339nano), so that a CNI call's lines and ipamd's sort and
// join on one clock format.
const LogTimeFormat = time.RFC3339Nano

// LogHandlerOptions make the plugin's JSON lines the daemons' shape: "ts" in
// LogTimeFormat, "level" in lower case (debug, info, warn, error), "msg".
func LogHandlerOptions(level slog.Leveler) *slog.HandlerOptions {
	return &slog.HandlerOptions{Level: level, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) > 0 {
			return a
		}
		switch a.Key {
		case slog.TimeKey:
			return slog.String("ts", a.Value.Time().Format(LogTimeFormat))
		case slog.LevelKey:
			return slog.String("level", strings.ToLower(a.Value.String()))
		}
		return a
	}}
}

// openLog returns the logger the config asks for, the writer it writes to, and a
// function that closes its file.
// A log file refused by the path rules (a *RefusedPath from OpenLog) is a CNI error
// naming log_file_path, returned with a logger to Stderr; a *HandOff from OpenLog ends
// the call; a file that cannot be opened for another reason (a full or read-only disk)
// must not fail the CNI call, so the plugin logs to Stderr, which runtimes capture.
func (p *Plugin) openLog(c *Config, plugin string) (*slog.Logger, io.Writer, func(), error) {
	w := p.Stderr
	if w == nil {
		w = io.Discard
	}
	closeFn := func() {}
	var openErr, refused error
	if c.LogFile != "" {
		rel, _ := Beneath(LogDir, c.LogFile)
		f, err := p.OpenLog(rel)
		var r *RefusedPath
		var h *HandOff
		switch {
		case errors.As(err, &h):
			return nil, nil, closeFn, h
		case errors.As(err, &r):
			refused = invalidConfig("ipam.log_file_path", fmt.Sprintf("%v: give a regular file beneath %s, or leave the key out to log to stderr", r, LogDir))
		case err != nil:
			openErr = err
		default:
			w, closeFn = f, func() { _ = f.Close() }
		}
	}
	log := slog.New(slog.NewJSONHandler(w, LogHandlerOptions(c.LogLevel))).With("plugin", plugin, "pid", p.PID)
	if openErr != nil {
		log.Warn("logging to stderr: cannot open log_file_path", "error", openErr.Error())
	}
	return log, w, closeFn, refused
}
