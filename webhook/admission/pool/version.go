package pool

import (
	"context"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/nicpool/nicpool/crds/api/v2beta1"
	"github.com/nicpool/nicpool/version"
)

// VersionProbeAnnotation, on a dry-run create of a SpiderIPPool, asks the webhook
// replica the API server calls which version it runs: it answers with a warning
// (VersionAnswer), whether it admits the pool or not (a pool of a family the switches
// disable included). A dry run writes nothing, so `kubectl nicpool version` learns
// through the API server, with the caller's own rights, what answers admission,
// wherever and however it runs.
const VersionProbeAnnotation = "ipam.nicpool.io/version-probe"

// versionAnswerPrefix begins the warning that answers a version probe.
const versionAnswerPrefix = "nicpool-webhook version "

// VersionAnswer is the warning that answers a version probe: the replica's build.
func VersionAnswer(i version.Info) string { return versionAnswerPrefix + i.String() }

// ParseVersionAnswer reads the build a version probe's warning names; ok is false
// for any other warning.
func ParseVersionAnswer(warning string) (i version.Info, ok bool) {
	rest, ok := strings.CutPrefix(warning, versionAnswerPrefix)
	if !ok {
		return i, false
	}
	return version.Parse(rest)
}

// versionProbe is the answer to a version probe, or nil when p is no probe: a probe
// is a dry run, so that what it asks never writes a pool.
func versionProbe(ctx context.Context, p *v2beta1.SpiderIPPool) admission.Warnings {
	if _, ok := p.Annotations[VersionProbeAnnotation]; !ok {
		return nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.DryRun == nil || !*req.DryRun {
		return nil
	}
	return admission.Warnings{VersionAnswer(version.Get())}
}
