// Package images builds container images from local files, without a registry or a container
// engine, and loads them into a containerd.
//
// These machines cannot pull from any registry, so every image the local cluster runs is built
// here: a Spec lists host files (or bytes) and where they go in the image, plus the entrypoint,
// user, environment and labels; Build turns it into a single-layer image and WriteTarball writes
// a docker-archive tarball that `ctr images import` accepts. Import loads a tarball into a
// containerd's k8s.io namespace, where the kubelet finds it (pods use imagePullPolicy Never or
// IfNotPresent).
//
// Adding an image is a few lines: build the static binary with GoBuildStatic, describe it in a
// Spec, and call WriteTarball. Pause and TofuModule are the two images the harness itself needs
// and show the pattern:
//
//	bin := filepath.Join(dir, "manager")
//	if err := images.GoBuildStatic(ctx, "", "github.com/capx-io/capx/cmd/manager", bin); err != nil { ... }
//	spec := images.Spec{
//		Ref:        "capx.local/manager:dev",
//		Files:      []images.File{{Source: bin, Path: "/manager", Mode: 0o755}},
//		Entrypoint: []string{"/manager"},
//		User:       images.NonRootUser,
//	}
//	if err := images.WriteTarball(spec, filepath.Join(dir, "manager.tar")); err != nil { ... }
package images
