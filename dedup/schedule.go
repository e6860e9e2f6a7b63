package dedup

import (
	"fmt"
	"math"
)

// Default growth parameters of a scalable filter (see Growth).
const (
	DefaultGrowthFactor = 2.0
	DefaultTightening   = 0.8
	// maxLayers bounds how many layers a filter may grow to; with the
	// default factor that is 2^63 times the initial capacity, so in practice
	// it only stops a misconfiguration from looping forever.
	maxLayers = 64
)

// Growth is the schedule by which a scalable filter adds layers, after
// Almeida, Baquero, Preguiça and Hutchison, "Scalable Bloom Filters" (2007).
//
// Layer i (from 0) holds
//
//	capacity_i = ceil(InitialCapacity · Factor^i)   items, and is sized for
//	fpp_i      = TargetFPP · (1 − Tightening) · Tightening^i.
//
// A key is reported present if any layer holds it, so the filter's
// false-positive rate is at most Σ fpp_i = TargetFPP · (1 − Tightening) ·
// Σ Tightening^i < TargetFPP, however many layers are added. Each layer is
// filled only up to its capacity, where its own rate reaches fpp_i.
//
// The zero value of Factor and Tightening means the defaults.
type Growth struct {
	// InitialCapacity is the number of items the first layer holds.
	InitialCapacity int64
	// TargetFPP bounds the false-positive rate of the whole filter, in (0, 1).
	TargetFPP float64
	// Factor multiplies each new layer's capacity (s in the paper); ≥ 1.
	Factor float64
	// Tightening multiplies each new layer's error rate (r in the paper); in (0, 1).
	Tightening float64
}

// LayerParams sizes one layer of a scalable filter.
type LayerParams struct {
	Capacity int64
	FPP      float64
}

// WithDefaults returns g with zero fields set to their defaults.
func (g Growth) WithDefaults() Growth {
	if g.Factor == 0 {
		g.Factor = DefaultGrowthFactor
	}
	if g.Tightening == 0 {
		g.Tightening = DefaultTightening
	}
	return g
}

// adopt returns g with each zero field set to stored's: a stored filter's
// schedule fills in what was not given.
func (g Growth) adopt(stored Growth) Growth {
	if g.InitialCapacity == 0 {
		g.InitialCapacity = stored.InitialCapacity
	}
	if g.TargetFPP == 0 {
		g.TargetFPP = stored.TargetFPP
	}
	if g.Factor == 0 {
		g.Factor = stored.Factor
	}
	if g.Tightening == 0 {
		g.Tightening = stored.Tightening
	}
	return g
}

// Validate reports the first field of g (after defaults) that cannot describe
// a filter.
func (g Growth) Validate() error {
	g = g.WithDefaults()
	switch {
	case g.InitialCapacity <= 0:
		return fmt.Errorf("%w: initial capacity %d must be positive", ErrInvalidParams, g.InitialCapacity)
	case !(g.TargetFPP > 0 && g.TargetFPP < 1):
		return fmt.Errorf("%w: target false-positive rate %v must be in (0, 1)", ErrInvalidParams, g.TargetFPP)
	case !(g.Factor >= 1) || math.IsInf(g.Factor, 0):
		return fmt.Errorf("%w: growth factor %v must be ≥ 1", ErrInvalidParams, g.Factor)
	case !(g.Tightening > 0 && g.Tightening < 1):
		return fmt.Errorf("%w: tightening ratio %v must be in (0, 1)", ErrInvalidParams, g.Tightening)
	}
	return nil
}

// Layer returns the parameters of layer i. g must be valid.
func (g Growth) Layer(i int) (LayerParams, error) {
	g = g.WithDefaults()
	if i < 0 || i >= maxLayers {
		return LayerParams{}, fmt.Errorf("%w: layer %d out of range [0, %d)", ErrInvalidParams, i, maxLayers)
	}
	c := math.Ceil(float64(g.InitialCapacity) * math.Pow(g.Factor, float64(i)))
	if c > math.MaxInt64/1024 {
		return LayerParams{}, fmt.Errorf("%w: layer %d capacity overflows", ErrInvalidParams, i)
	}
	p := g.TargetFPP * (1 - g.Tightening) * math.Pow(g.Tightening, float64(i))
	if p < math.SmallestNonzeroFloat64 {
		return LayerParams{}, fmt.Errorf("%w: layer %d error rate underflows", ErrInvalidParams, i)
	}
	return LayerParams{Capacity: int64(c), FPP: p}, nil
}
