package whereabouts

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Requests are kube-apiserver's counters, read from its /metrics before and after a
// run; Sub gives what the run cost.
type Requests struct {
	// Writes are POST/PUT/PATCH/DELETE requests (events and auth reviews left out),
	// by resource; Reads are GET/LIST by resource.
	Writes, Reads map[string]int64
	// Codes counts every request by HTTP status code (409 Conflict, 422 from a
	// failed JSON-patch test, 429 Too Many Requests, ...).
	Codes map[string]int64
	// CPU is kube-apiserver's process_cpu_seconds_total.
	CPU float64
}

// Total sums a by-resource map.
func Total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// Sub is r minus before.
func (r Requests) Sub(before Requests) Requests {
	d := Requests{Writes: map[string]int64{}, Reads: map[string]int64{}, Codes: map[string]int64{}, CPU: r.CPU - before.CPU}
	for k, v := range r.Writes {
		d.Writes[k] = v - before.Writes[k]
	}
	for k, v := range r.Reads {
		d.Reads[k] = v - before.Reads[k]
	}
	for k, v := range r.Codes {
		d.Codes[k] = v - before.Codes[k]
	}
	return d
}

// Scrape reads kube-apiserver's apiserver_request_total and CPU time.
func Scrape(ctx context.Context, cfg *rest.Config) (Requests, error) {
	r := Requests{Writes: map[string]int64{}, Reads: map[string]int64{}, Codes: map[string]int64{}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return r, err
	}
	raw, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return r, fmt.Errorf("scrape kube-apiserver /metrics: %w", err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "process_cpu_seconds_total "); ok {
			r.CPU, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			continue
		}
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		end := strings.LastIndex(rest, "}")
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := rest[:end]
		verb, code, resource := label(labels, "verb"), label(labels, "code"), label(labels, "resource")
		if resource == "events" || resource == "subjectaccessreviews" || resource == "tokenreviews" {
			continue
		}
		n := int64(v)
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE":
			r.Writes[resource] += n
		case "GET", "LIST":
			r.Reads[resource] += n
		default:
			continue
		}
		r.Codes[code] += n
	}
	return r, sc.Err()
}

func label(labels, name string) string {
	for kv := range strings.SplitSeq(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// LoadAverage tells how busy the shared machine was, to read wall times against.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
