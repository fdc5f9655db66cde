package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

func runArtifact(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 1 {
		fmt.Fprintln(stderr, "usage: sluice artifact push FILE\n       sluice artifact get DIGEST > FILE")
		return exitError{2}
	}
	client, err := newClient()
	if err != nil {
		return err
	}
	switch args[0] {
	case "push":
		if len(args) != 2 {
			return errors.New("usage: sluice artifact push FILE")
		}
		f, err := os.Open(args[1])
		if err != nil {
			return err
		}
		defer f.Close()
		// The body streams from the file: artifacts can be large.
		resp, err := client.PutArtifactWithBodyWithResponse(ctx, "application/octet-stream", f)
		if err != nil {
			return err
		}
		if resp.JSON201 == nil {
			return apiError(resp.HTTPResponse, resp.Body)
		}
		fmt.Fprintf(stderr, "stored %s (%d bytes)\n", args[1], resp.JSON201.Size)
		fmt.Fprintln(stdout, resp.JSON201.Digest)
		return nil
	case "get":
		if len(args) != 2 {
			return errors.New("usage: sluice artifact get DIGEST > FILE")
		}
		// The raw method: the WithResponse variant would buffer the file.
		resp, err := client.GetArtifact(ctx, args[1])
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			body, _ := io.ReadAll(resp.Body)
			return apiError(resp, body)
		}
		_, err = io.Copy(stdout, resp.Body)
		return err
	default:
		return fmt.Errorf("unknown artifact command %q: use push or get", args[0])
	}
}
