package controlplane

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"sluice/internal/redact"
)

// certReloader serves the certificate in a pair of PEM files, loaded again
// when either file changes, so a renewed certificate (certbot, cert-manager,
// a cron job) is served from the next handshake on without a restart. A
// pair that does not load keeps the certificate before it in service, and
// says so in the log once per change.
type certReloader struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string // the files' sizes and times the certificate was loaded at
	refused string // the stamp last refused, logged once
	checked time.Time
}

// checkEvery bounds how often a handshake looks at the files.
const checkEvery = time.Second

func newCertReloader(certFile, keyFile string, logger *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, logger: logger}
	stamp, err := r.stampNow()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("SLUICE_TLS_CERT and SLUICE_TLS_KEY: %w", err)
	}
	r.cert, r.stamp, r.checked = &cert, stamp, time.Now()
	return r, nil
}

func (r *certReloader) stampNow() (string, error) {
	var stamp string
	for _, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("SLUICE_TLS_CERT and SLUICE_TLS_KEY: %w", err)
		}
		stamp += fmt.Sprintf("%d:%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}

// GetCertificate implements tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < checkEvery {
		return r.cert, nil
	}
	r.checked = time.Now()
	stamp, err := r.stampNow()
	if err != nil || stamp == r.stamp || stamp == r.refused {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// Half written, or a key that does not match yet: the next change
		// is tried again.
		r.refused = stamp
		r.logger.Warn("the TLS certificate changed but does not load; serving the one before", "err", redact.Error(err))
		return r.cert, nil
	}
	r.cert, r.stamp, r.refused = &cert, stamp, ""
	r.logger.Info("serving the TLS certificate loaded again from its files", "cert", r.certFile)
	return r.cert, nil
}

// tlsConfig is serve's TLS configuration over r.
func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12}
}
