package daemon

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nicpool/nicpool/version"
)

// Heartbeat timing: the Lease is renewed every HeartbeatInterval and counts as
// expired HeartbeatDuration after its last renewal, as the kubelet's node Lease does.
const (
	HeartbeatInterval = 10 * time.Second
	HeartbeatDuration = 40 * time.Second
)

// LeaseName is the name of node's heartbeat Lease: `kubectl nicpool status` reads it
// to know that ipamd runs on the node with its caches synced.
// (The name's prefix is the one nicpool's admission policy lets ipamd write.)
func LeaseName(node string) string { return "nicpool-ipamd-" + node }

// heartbeat renews the node's Lease in namespace until ctx ends, then marks it
// released (no holder), so that a stopped ipamd is seen at once and a crashed one
// when the Lease expires. The Lease's version label (version.LabelKey) is the
// version of the ipamd that last renewed it.
func (d *Daemon) heartbeat(ctx context.Context, c client.Client, namespace string) {
	log := d.opts.Log.WithName("heartbeat")
	// The version of the ipamd that renews the Lease, for kubectl nicpool version.
	ver := version.Label(version.Get().Version)
	renew := func(ctx context.Context, holder *string) error {
		now := metav1.NewMicroTime(time.Now())
		lease := &coordinationv1.Lease{}
		key := client.ObjectKey{Namespace: namespace, Name: LeaseName(d.opts.NodeName)}
		err := c.Get(ctx, key, lease)
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: key.Name, Labels: map[string]string{"app.kubernetes.io/name": "nicpool-ipamd", "app.kubernetes.io/part-of": "nicpool", version.LabelKey: ver}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: holder, LeaseDurationSeconds: ptr.To(int32(HeartbeatDuration / time.Second)),
					AcquireTime: &now, RenewTime: &now},
			}
			return c.Create(ctx, lease)
		}
		if err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || holder == nil {
			lease.Spec.AcquireTime = &now
		}
		if lease.Labels == nil {
			lease.Labels = map[string]string{}
		}
		lease.Labels[version.LabelKey] = ver
		lease.Spec.HolderIdentity, lease.Spec.RenewTime = holder, &now
		lease.Spec.LeaseDurationSeconds = ptr.To(int32(HeartbeatDuration / time.Second))
		return c.Update(ctx, lease)
	}
	t := time.NewTicker(HeartbeatInterval)
	defer t.Stop()
	for {
		if err := renew(ctx, ptr.To(d.opts.NodeName)); err != nil && ctx.Err() == nil {
			log.Error(err, "renew heartbeat Lease", "namespace", namespace)
		}
		select {
		case <-ctx.Done():
			stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := renew(stop, nil); err != nil {
				log.Error(err, "release heartbeat Lease", "namespace", namespace)
			}
			cancel()
			return
		case <-t.C:
		}
	}
}
