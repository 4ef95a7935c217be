// Package imagepublish makes sure every location of a geo cluster can see its image from
// spec.geo.locationImages. Images are per location and not portable; an operator uploads one per
// location, and until it is published the cluster's own credential cannot see it. With an
// operator credential (spec.geo.imagePublishCredentialSecretRef) the controller publishes it;
// without one, or when the platform refuses (403 for a customer credential), the caller reports
// which image of which location is missing and what to do.
package imagepublish

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/go-logr/logr"

	"github.com/capx-io/capx/internal/vco"
)

// Viewer is the cluster credential's view of images.
type Viewer interface {
	GetImage(ctx context.Context, location string, id int) (vco.Image, error)
}

// Publisher is the operator credential's publish call.
type Publisher interface {
	PublishImage(ctx context.Context, location string, id int) error
}

// Outcome is one location's image.
type Outcome struct {
	Location string
	ID       int64
	// Visible: the cluster's credential sees the image (after publishing, if it had to).
	Visible bool
	// Published: this call published it.
	Published bool
	// Err is why it is not visible: ErrNotVisible (no publisher), ErrNoSuchImage, or the
	// publisher's error (vco.ErrForbidden for a credential that is not an operator's).
	Err error
}

var (
	// ErrNotVisible: the cluster's credential cannot see the image and there is no operator
	// credential to publish it.
	ErrNotVisible = errors.New("not visible to the cluster's credential")
	// ErrNoSuchImage: the operator's publish call found no such image in the location.
	ErrNoSuchImage = errors.New("no such image in the location")
)

// Ensure checks the image of each location (those of images that locations names, in order)
// and publishes the ones the viewer cannot see with publisher (nil: no operator credential).
// A read that fails for another reason than 404 ends the call with that error.
func Ensure(ctx context.Context, viewer Viewer, publisher Publisher, images map[string]int64, locations []string) ([]Outcome, error) {
	var out []Outcome
	for _, loc := range sortedUnique(locations) {
		id, ok := images[loc]
		if !ok {
			continue
		}
		o := Outcome{Location: loc, ID: id}
		visible, err := sees(ctx, viewer, loc, id)
		if err != nil {
			return out, err
		}
		switch {
		case visible:
			o.Visible = true
		case publisher == nil:
			o.Err = ErrNotVisible
		default:
			err := publisher.PublishImage(ctx, loc, int(id))
			switch {
			case errors.Is(err, vco.ErrNotFound):
				o.Err = ErrNoSuchImage
			case err != nil:
				o.Err = err
			default:
				o.Published = true
				logr.FromContextOrDiscard(ctx).Info("Published image with the operator credential", "imageID", id, "location", loc)
				if o.Visible, err = sees(ctx, viewer, loc, id); err != nil {
					return out, err
				}
				if !o.Visible {
					o.Err = fmt.Errorf("published, but the cluster's credential still cannot see it: %w", ErrNotVisible)
				}
			}
		}
		out = append(out, o)
	}
	return out, nil
}

func sees(ctx context.Context, viewer Viewer, location string, id int64) (bool, error) {
	_, err := viewer.GetImage(ctx, location, int(id))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, vco.ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("read image %d in %s: %w", id, location, err)
	}
}

func sortedUnique(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
