// Package gpucheck finds the vGPU reservations nobody owns and releases them safely. It is the
// engine behind capvco-gpucheck and kubectl capvco gpucheck.
//
// A reservation is billed from the moment it exists until it is released permanently, and the
// platform has no owner field: CAPVCO names every reservation
// capvco_<namespace>_<cluster>_<machine>_gpu_<n> (package gpuname). The engine works in three
// steps, each its own file:
//
//   - list.go reads every reservation of every location, page by page to the end, and refuses
//     to conclude anything for a location it could not read completely;
//   - classify.go sorts each reservation, in one pure function, against what the management
//     cluster holds (owners.go): owned by a live VCOMachine, orphaned, renamed, attached to a
//     VM that is not ours, in the recycle bin, or unverified when no cluster could be asked;
//   - release.go releases the chosen orphans permanently, re-checking the owner and re-reading
//     the reservation just before each release, and never touching one that changed.
package gpucheck
