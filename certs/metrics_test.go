package certs_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nicpool/nicpool/certs"
)

// A mounted tls.crt (cert-manager mode) is read at each scrape: the gauge is its
// notAfter, follows a renewal, and is absent while the file is missing or not PEM.
func TestExpiryOfMountedCertificate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tls.crt")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(certs.ExpiryCollector{Current: certs.FileCertificate(path)})
	count := func() int {
		n, err := testutil.GatherAndCount(reg, "nicpool_webhook_certificate_expiry_timestamp_seconds")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("no tls.crt yet: %d series, want none", n)
	}
	for _, notAfter := range []time.Time{time.Unix(1_900_000_000, 0), time.Unix(1_950_000_000, 0)} {
		// A key before the certificate, as some tools write a bundle.
		writeCert(t, path, notAfter)
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if len(families) != 1 || families[0].GetMetric()[0].GetGauge().GetValue() != float64(notAfter.Unix()) {
			t.Fatalf("gathered %v, want notAfter %d", families, notAfter.Unix())
		}
	}
	if err := os.WriteFile(path, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 {
		t.Fatalf("tls.crt not PEM: %d series, want none", n)
	}
}

func writeCert(t *testing.T, path string, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nicpool-webhook"},
		NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	{
		k, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		out = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k})
	}
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}
