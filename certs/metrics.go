package certs

import (
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus"
)

var expiryDesc = prometheus.NewDesc("nicpool_webhook_certificate_expiry_timestamp_seconds",
	"When the serving certificate this replica presents expires (notAfter), in seconds since the epoch.", nil, nil)

// ExpiryCollector reports the notAfter of the serving certificate at scrape time; no
// series while there is no certificate (the replica is not ready then).
type ExpiryCollector struct {
	// Current returns the certificate being served, or nil.
	Current func() *x509.Certificate
}

// Describe implements prometheus.Collector.
func (c ExpiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

// Collect implements prometheus.Collector.
func (c ExpiryCollector) Collect(ch chan<- prometheus.Metric) {
	if cert := c.Current(); cert != nil {
		ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(cert.NotAfter.Unix()))
	}
}

// maxCertFile bounds the read of a certificate file: a serving chain is a few KiB.
const maxCertFile = 1 << 20

// FileCertificate returns the first certificate of the PEM file at path (tls.crt of
// the certificate directory, as cert-manager's Secret mounts it) each time it is
// called, or nil when the file is missing or holds no certificate.
func FileCertificate(path string) func() *x509.Certificate {
	return func() *x509.Certificate {
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxCertFile))
		if err != nil {
			return nil
		}
		for {
			var block *pem.Block
			block, data = pem.Decode(data)
			if block == nil {
				return nil
			}
			if block.Type != "CERTIFICATE" {
				continue
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil
			}
			return cert
		}
	}
}
