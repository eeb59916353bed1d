package memory

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nicpool/nicpool/ipamd/api"
)

// largestConfig is the largest network configuration ipamd parses (api.MaxConfig),
// shaped as what cost it most: a prevResult and an ipam section of small keys, which
// a decoder into maps holds many times over.
func largestConfig(pool string) []byte {
	head := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"big","type":"macvlan","ipam":{"type":"nicpool","default_ipv4_ippool":[%q]`, pool)
	var b strings.Builder
	b.WriteString(head)
	for i := 0; b.Len() < api.MaxConfig/2; i++ {
		fmt.Fprintf(&b, `,"i%d":0`, i)
	}
	b.WriteString(`},"prevResult":{"x":0`)
	for i := 0; b.Len() < api.MaxConfig-16; i++ {
		fmt.Fprintf(&b, `,"p%d":0`, i)
	}
	b.WriteString("}}")
	return []byte(b.String())
}

// frontADD sends one ADD as the front does (POST /v1/cni) and returns ipamd's answer:
// its status, the plugin's exit code and stdout.
func frontADD(socket string, f *api.Frame) (int, int, string, error) {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return 0, 0, "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Minute))
	if _, err := c.Write(api.FrameRequest(f)); err != nil {
		return 0, 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, "", err
	}
	exit, _ := strconv.Atoi(resp.Header.Get(api.HeaderExit))
	n, _ := strconv.Atoi(resp.Header.Get(api.HeaderStdout))
	return resp.StatusCode, exit, string(body[:min(n, len(body))]), nil
}

// BenchmarkLargestConfigurations measures what the largest network configurations
// ipamd accepts cost it: 32 ADDs at once through the front's path (ipamd parses each
// configuration), every one of api.MaxConfig, against the real nicpool-ipamd with the
// DaemonSet's Go runtime settings. It reports ipamd's peak resident set (VmHWM) over
// its life, before and after the ADDs, against the budget of docs/security.md: under
// half the DaemonSet's 256Mi limit.
func BenchmarkLargestConfigurations(b *testing.B) {
	const adds = 32
	f := fixture{Name: "cfgs", Pools: 1, PerPool: 0, Free: 4 * adds, Nodes: 1, Octet: 91}
	c := writer(b)
	populate(b, c, f)
	bins := buildBinaries(b)
	d := startIpamd(b, bins.Ipamd, env.Kubeconfig, f.node(0))
	d.waitReady(b, f)
	frames := make([]*api.Frame, adds)
	config := largestConfig(f.pool(0))
	if len(config) > api.MaxConfig {
		b.Fatalf("the configuration is %d bytes, over api.MaxConfig", len(config))
	}
	for i := range frames {
		pod := f.podObject(0, 100+i)
		pod.Spec.NodeName = d.Node
		if err := c.Create(context.Background(), pod); err != nil {
			b.Fatal(err)
		}
		frames[i] = &api.Frame{Name: "nicpool", PID: 1000 + i, NetNS: api.NetNSOther, Stdin: config, Env: map[string]string{
			"CNI_COMMAND": "ADD", "CNI_CONTAINERID": fmt.Sprintf("c%d", i), "CNI_NETNS": "/var/run/netns/p", "CNI_IFNAME": "eth0",
			"CNI_ARGS": fmt.Sprintf("K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s", pod.Namespace, pod.Name, pod.UID), "CNI_PATH": "/opt/cni/bin"}}
	}
	before, _ := settle(b, d.Process, time.Minute)
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make([]error, adds)
		for i, fr := range frames {
			wg.Go(func() {
				status, exit, stdout, err := frontADD(d.Socket, fr)
				switch {
				case err != nil:
					errs[i] = err
				case status != http.StatusOK || exit != 0 || !strings.Contains(stdout, "10.91."):
					errs[i] = fmt.Errorf("HTTP %d, exit %d, stdout %.300q: want the address served by ipamd, not handed back", status, exit, stdout)
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				b.Fatalf("ADD %d: %v", i, err)
			}
		}
	}
	after, err := d.Memory()
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Alive(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(mib(after.HWM), "peak-RSS-MiB")
	b.Logf("ipamd with %d ADDs at once of a %d-byte configuration: VmHWM %.1f MiB before them (VmRSS %.1f), %.1f MiB after (VmRSS %.1f); budget: under 128 MiB",
		adds, len(config), mib(before.HWM), mib(before.RSS), mib(after.HWM), mib(after.RSS))
}
