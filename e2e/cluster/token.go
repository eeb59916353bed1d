package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// NodeTokenKubeconfig writes a kubeconfig that authenticates with a token of the
// service account namespace/name bound to Node node, and returns its path. The API
// server then knows which node the holder acts for (user extra
// authentication.kubernetes.io/node-name), as it does for the token the kubelet
// projects into a pod on that node: a node daemon run outside a pod gets the same
// identity as in its DaemonSet. The token is valid while the Node exists, for a day.
func (c *Cluster) NodeTokenKubeconfig(ctx context.Context, namespace, name, node string) (string, error) {
	n, err := c.Clientset.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s bound to node %s: %w", namespace, name, node, err)
	}
	day := int64((24 * time.Hour).Seconds())
	tr, err := c.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &day,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for %s/%s bound to node %s: %w", namespace, name, node, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	kc.CurrentContext = "local"
	path := filepath.Join(c.Dir, name+"-"+node+".kubeconfig")
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return "", err
	}
	return path, clientcmd.WriteToFile(*kc, path)
}
