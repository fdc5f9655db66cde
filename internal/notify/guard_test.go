package notify_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"sluice/internal/errs"
	"sluice/internal/notify"
)

func TestGuard(t *testing.T) {
	t.Parallel()

	var g notify.Guard
	refused := map[string]string{
		"127.0.0.1":              "loopback",
		"127.1":                  "loopback",
		"127.0.1":                "loopback",
		"2130706433":             "loopback",
		"0x7f000001":             "loopback",
		"0x7f.1":                 "loopback",
		"0177.0.0.1":             "loopback",
		"127.0.0.1.":             "loopback",
		"::1":                    "loopback",
		"[::1]":                  "loopback",
		"::ffff:127.0.0.1":       "loopback",
		"::ffff:7f00:1":          "loopback",
		"64:ff9b::7f00:1":        "loopback",
		"2002:7f00:1::1":         "loopback",
		"0.0.0.0":                "unspecified",
		"0":                      "unspecified",
		"::":                     "unspecified",
		"10.1.2.3":               "private",
		"172.16.0.1":             "private",
		"172.31.255.255":         "private",
		"192.168.1.1":            "private",
		"::ffff:192.168.1.1":     "private",
		"fc00::1":                "private",
		"fd12:3456::1":           "private",
		"169.254.169.254":        "metadata",
		"::ffff:169.254.169.254": "metadata",
		"2852039166":             "metadata", // 169.254.169.254 in decimal
		"169.254.1.1":            "link-local",
		"fe80::1":                "link-local",
		"fe80::1%eth0":           "link-local",
		"100.64.0.1":             "carrier-grade NAT",
		"100.127.255.254":        "carrier-grade NAT",
		"224.0.0.1":              "multicast",
		"ff02::1":                "multicast",
		"255.255.255.255":        "broadcast",
	}
	for host, kind := range refused {
		err := g.CheckHost(host)
		require.Error(t, err, host)
		require.Contains(t, err.Error(), kind, host)
		var re *notify.AddressRefusedError
		require.ErrorAs(t, err, &re, host)
	}
	for _, host := range []string{
		"93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "169.255.0.1", "2606:4700::1111",
		"::ffff:8.8.8.8", "hooks.example.com", "127.0.0.1.example.com", "0x7f000001.example", "1.2.3.4.5",
	} {
		require.NoError(t, g.CheckHost(host), host)
	}

	allowed := notify.Guard{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32")}}
	for _, host := range []string{"10.9.8.7", "127.0.0.1", "2130706433", "::ffff:10.0.0.1"} {
		require.NoError(t, allowed.CheckHost(host), host)
	}
	for _, host := range []string{"127.0.0.2", "192.168.1.1", "169.254.169.254", "::1"} {
		require.Error(t, allowed.CheckHost(host), host)
	}

	nets, err := notify.ParseAllowNets(" 10.0.0.0/8, 127.0.0.1/32 ,,fd00::/8")
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("fd00::/8"),
	}, nets)
	nets, err = notify.ParseAllowNets("")
	require.NoError(t, err)
	require.Empty(t, nets)
	for _, bad := range []string{"10.0.0.1", "10.0.0.0/33", "ten/8", "10.0.0.1/8"} {
		_, err := notify.ParseAllowNets(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), bad)
	}
}

func TestNotifyGuard(t *testing.T) {
	t.Parallel()

	t.Run("ATargetAtARefusedAddressIsRefusedAtCreateInEveryForm", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowNets: []netip.Prefix{}})
		recv := newReceiver(t, http.StatusOK)
		_, port, err := net.SplitHostPort(recv.Listener.Addr().String())
		require.NoError(t, err)
		for i, host := range []string{
			"127.0.0.1", "2130706433", "127.1", "0x7f000001", "0177.0.0.1", "[::ffff:127.0.0.1]", "[::1]",
			"169.254.169.254", "10.0.0.1", "[fe80::1]", "100.64.0.1", "0.0.0.0",
		} {
			_, err := b.notify.CreateTarget(context.Background(),
				httpTarget(fmt.Sprintf("t%d", i), "http://"+host+":"+port+"/hook", "0123456789abcdef"), "ada")
			require.Error(t, err, host)
			require.Equal(t, errs.Invalid, errs.CodeOf(err), host)
			require.Contains(t, err.Error(), notify.AllowNetsVar, host)
		}
		targets, err := b.notify.ListTargets(context.Background())
		require.NoError(t, err)
		require.Empty(t, targets)
		require.Empty(t, recv.got())
	})

	t.Run("ANameThatResolvesToLoopbackIsRefusedAtSend", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowNets: []netip.Prefix{}, maxAttempts: 5})
		recv := newReceiver(t, http.StatusOK)
		_, port, err := net.SplitHostPort(recv.Listener.Addr().String())
		require.NoError(t, err)
		// localhost is a name: it is stored, and what it resolves to is
		// refused when the dialer is about to connect.
		_, err = b.notify.CreateTarget(context.Background(), httpTarget("local", "http://localhost:"+port+"/hook", "0123456789abcdef"), "ada")
		require.NoError(t, err)

		_, d, err := b.notify.TestSend(context.Background(), "local", "otto")
		require.NoError(t, err)
		d = b.waitDelivery(t, d.ID)
		require.Equal(t, notify.StateGaveUp, d.State, "a refused address is not retried")
		require.EqualValues(t, 1, d.Attempts)
		require.Nil(t, d.LastStatus)
		require.Contains(t, *d.LastError, "Not sent to target local")
		require.Contains(t, *d.LastError, "loopback address")
		require.Contains(t, *d.LastError, notify.AllowNetsVar)
		require.NotContains(t, *d.LastError, receiverAnswer)
		require.Empty(t, recv.got(), "nothing reached the receiver")
	})

	t.Run("ATargetStoredAtARefusedAddressIsRefusedAtSendInEveryForm", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowNets: []netip.Prefix{}})
		recv := newReceiver(t, http.StatusOK)
		_, port, err := net.SplitHostPort(recv.Listener.Addr().String())
		require.NoError(t, err)
		// Targets stored while loopback was allowed (or before the guard
		// existed), sent by a service that allows nothing.
		creator := &notify.Service{
			Pool: b.pool, Journal: b.journal, Secrets: b.notify.Secrets, Redactor: b.notify.Redactor,
			AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		}
		hosts := []string{"127.0.0.1", "2130706433", "127.1", "0x7f000001", "0177.0.0.1", "[::ffff:127.0.0.1]"}
		for i, host := range hosts {
			_, err := creator.CreateTarget(context.Background(),
				httpTarget(fmt.Sprintf("t%d", i), "http://"+host+":"+port+"/hook", "0123456789abcdef"), "ada")
			require.NoError(t, err, host)
		}
		for i, host := range hosts {
			_, d, err := b.notify.TestSend(context.Background(), fmt.Sprintf("t%d", i), "otto")
			require.NoError(t, err)
			d = b.waitDelivery(t, d.ID)
			require.Equal(t, notify.StateGaveUp, d.State, host)
			require.Contains(t, *d.LastError, "127.0.0.1 is a loopback address", host)
			require.NotContains(t, *d.LastError, receiverAnswer, host)
		}
		require.Empty(t, recv.got(), "nothing reached the receiver")
	})

	t.Run("ARedirectIsNotFollowed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		// The target is allowed (127.0.0.1/32); where it redirects is not.
		inside := newReceiverAt(t, http.StatusOK, "127.0.0.2")
		recv := newReceiver(t, http.StatusTemporaryRedirect)
		recv.location = inside.URL + "/admin"
		_, err := b.notify.CreateTarget(context.Background(), httpTarget("hop", recv.URL, "0123456789abcdef"), "ada")
		require.NoError(t, err)

		_, d, err := b.notify.TestSend(context.Background(), "hop", "otto")
		require.NoError(t, err)
		d = b.waitDelivery(t, d.ID)
		require.Equal(t, notify.StateGaveUp, d.State)
		require.EqualValues(t, http.StatusTemporaryRedirect, *d.LastStatus)
		require.NotContains(t, *d.LastError, receiverAnswer)
		require.Len(t, recv.got(), 1)
		require.Empty(t, inside.got(), "the redirect reached its location")
	})

	t.Run("AnAllowedNetworkIsReachedAndNoOther", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{allowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
		allowed := newReceiverAt(t, http.StatusOK, "127.0.0.2")
		other := newReceiver(t, http.StatusOK) // 127.0.0.1
		_, err := b.notify.CreateTarget(context.Background(), httpTarget("inside", allowed.URL+"/hook", "0123456789abcdef"), "ada")
		require.NoError(t, err)
		_, err = b.notify.CreateTarget(context.Background(), httpTarget("other", other.URL+"/hook", "0123456789abcdef"), "ada")
		require.Equal(t, errs.Invalid, errs.CodeOf(err))

		_, d, err := b.notify.TestSend(context.Background(), "inside", "otto")
		require.NoError(t, err)
		require.Equal(t, notify.StateDelivered, b.waitDelivery(t, d.ID).State)
		require.Len(t, allowed.got(), 1)
		require.Empty(t, other.got())
	})
}
