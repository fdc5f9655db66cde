package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"sluice/internal/dbtest"
)

// testCA is a certificate authority made in the test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a certificate for 127.0.0.1 with serial, and its key, to
// certFile and keyFile, each through a rename as a renewal tool does.
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "sluice serve"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	write(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	write(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func write(t *testing.T, file string, data []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(file+".new", data, 0o600))
	require.NoError(t, os.Rename(file+".new", file))
}

// servedSerial is the serial of the certificate serve presents now.
func servedSerial(t *testing.T, addr string, ca *testCA) int64 {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// serve speaks HTTPS with the certificate and key it is given, loads them
// again when they change, and its CLI and agents reach it trusting a CA
// of the operator's own (SLUICE_CA_FILE).
func TestServeTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := newTestCA(t)
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "serve.pem"), filepath.Join(dir, "serve-key.pem")
	write(t, caFile, ca.pem)
	ca.issue(t, 100, certFile, keyFile)

	p, _ := startServe(t, "SLUICE_DATABASE_URL="+dbtest.NewDB(t), "SLUICE_DATA_DIR="+filepath.Join(dir, "serve"),
		"SLUICE_NODE_NAME=-", "SLUICE_TLS_CERT="+certFile, "SLUICE_TLS_KEY="+keyFile, "SLUICE_CA_FILE="+caFile)
	require.True(t, strings.HasPrefix(p.URL, "https://"), p.URL)
	addr := strings.TrimPrefix(p.URL, "https://")
	require.Contains(t, p.Logs.String(), `"url":"https://`+addr+`"`)

	// Plain HTTP gets no answer of the API's.
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	// The CLI trusts the CA it is given, and only then.
	out, code := p.cliOut("node", "add", "edge-1")
	require.Equal(t, 0, code, out)
	token := regexp.MustCompile(`sluice_join_[A-Za-z0-9_-]+`).FindString(out)
	require.NotEmpty(t, token, out)
	noCA := *p.Proc
	noCA.CAFile = ""
	out, code = (&proc{t: t, Proc: &noCA}).cliOut("node", "list")
	require.NotEqual(t, 0, code, out)
	require.Contains(t, out, "certificate signed by unknown authority")

	// An agent joins over HTTPS, trusting the same CA.
	startAgentIn(t, "", p, "edge-1", filepath.Join(dir, "agent"), "SLUICE_JOIN_TOKEN="+token)
	p.waitNode("edge-1", "Ready")

	// A renewed certificate is served from a handshake soon after, without
	// a restart; a pair that does not load leaves the one before in service.
	require.Equal(t, int64(100), servedSerial(t, addr, ca))
	ca.issue(t, 101, certFile, keyFile)
	require.Eventually(t, func() bool { return servedSerial(t, addr, ca) == 101 }, 10*time.Second, 100*time.Millisecond)
	write(t, certFile, []byte("not a certificate"))
	time.Sleep(1500 * time.Millisecond)
	require.Equal(t, int64(101), servedSerial(t, addr, ca))
	require.Eventually(t, func() bool {
		return strings.Contains(p.Logs.String(), "the TLS certificate changed but does not load")
	}, 5*time.Second, 100*time.Millisecond)
	p.waitNode("edge-1", "Ready")
}

// An agent sends its credential over plain HTTP only to loopback, unless
// told, and serve's certificate and key go together.
func TestTLSConfigRefusals(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{"SLUICE_NODE_NAME": "edge-1"}
		for _, e := range kv {
			k, v, _ := strings.Cut(e, "=")
			m[k] = v
		}
		return func(k string) string { return m[k] }
	}
	for _, url := range []string{"http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080", "https://sluice.example.com"} {
		_, err := loadAgentConfig(env("SLUICE_URL=" + url))
		require.NoError(t, err, url)
	}
	_, err := loadAgentConfig(env("SLUICE_URL=http://sluice.example.com:8080"))
	require.ErrorContains(t, err, "SLUICE_URL http://sluice.example.com:8080 is plain http:// to a host that is not loopback")
	require.ErrorContains(t, err, "SLUICE_AGENT_ALLOW_HTTP=1")
	_, err = loadAgentConfig(env("SLUICE_URL=http://10.0.0.5:8080", "SLUICE_AGENT_ALLOW_HTTP=1"))
	require.NoError(t, err)
	_, err = loadAgentConfig(env("SLUICE_URL=http://10.0.0.5:8080", "SLUICE_AGENT_ALLOW_HTTP=yes"))
	require.ErrorContains(t, err, "SLUICE_AGENT_ALLOW_HTTP must be 1 or 0")

	_, err = loadServeConfig(envOf("SLUICE_TLS_CERT=/etc/sluice/cert.pem"))
	require.ErrorContains(t, err, "SLUICE_TLS_CERT and SLUICE_TLS_KEY go together")
}
