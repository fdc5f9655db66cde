package apiclient

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
)

// Transport returns the HTTP transport a client of sluice's API uses:
// http.DefaultTransport's settings, trusting the system's roots and, when
// caFile is set (SLUICE_CA_FILE), the PEM certificates in it too, such as
// a private CA that signed serve's certificate.
func Transport(caFile string) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if caFile == "" {
		return t, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("SLUICE_CA_FILE: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("SLUICE_CA_FILE: %s holds no PEM certificate", caFile)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// IsPlainRemote reports whether rawURL is plain http:// to a host that is
// not this machine's loopback: a credential sent there crosses a network
// in clear.
func IsPlainRemote(rawURL string) (bool, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false, err
	}
	if u.Scheme != "http" {
		return false, nil
	}
	host := u.Hostname()
	if host == "localhost" {
		return false, nil
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback(), nil
}
