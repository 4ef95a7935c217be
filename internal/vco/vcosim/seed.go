package vcosim

import (
	"fmt"
	"slices"
)

// Seed is the platform a simulator starts with.
type Seed struct {
	Customers  []Customer
	Locations  []Location
	Images     []Image     // ID is assigned; Location must name a seeded location
	Principals []Principal // an empty Secret with a ClientID gets a random one
}

// Names in the default seed, for tests and docs.
const (
	SeedCustomer       = "acme"
	SeedLocation       = "nl-rmd-dc01-001"
	SeedLocation2      = "be-mac-dc01-001"
	SeedClusterPrinc   = "capvco"       // service account with a customer grant: what a cluster holds
	SeedOperatorPrinc  = "vco-operator" // customer admin and VCO operator
	SeedGPUProfile     = "nvidia-a100-1g-10gb"
	SeedStubGPUProfile = "stub-vgpu"
	SeedImageName      = "Ubuntu 24.04"
)

// DefaultSeed is one customer in two locations, each with a public external network, two
// images (with different ids per location: images do not travel) and two GPU profiles.
func DefaultSeed() Seed {
	gpus := func() []*GPUProfile {
		return []*GPUProfile{
			{ID: SeedGPUProfile, Vendor: "NVIDIA", Model: "A100", Description: "A100 1g.10gb MIG slice", Instances: 16},
			{ID: SeedStubGPUProfile, Vendor: "NVIDIA", Model: "stub", Description: "placeholder profile: attaches, runs nothing", Instances: 100000},
		}
	}
	seed := Seed{
		Customers: []Customer{{ID: SeedCustomer, Name: "Acme Corp", Locations: []string{SeedLocation, SeedLocation2}}},
		Locations: []Location{
			{Name: SeedLocation, Datacenter: "RMD", City: "Rotterdam", Country: "Netherlands", CountryCode: "NL",
				ExternalNetworks: []*ExternalNetwork{
					{ID: 1, Name: "public-rmd", Prefix: "203.0.113", Gateway: "203.0.113.1", Public: true},
					{ID: 2, Name: "provider-rmd", Prefix: "100.64.10", Gateway: "100.64.10.1"},
				}, GPUProfiles: gpus()},
			{Name: SeedLocation2, Datacenter: "MAC", City: "Machelen", Country: "Belgium", CountryCode: "BE",
				ExternalNetworks: []*ExternalNetwork{{ID: 3, Name: "public-mac", Prefix: "198.51.100", Gateway: "198.51.100.1", Public: true}},
				GPUProfiles:      gpus()},
		},
		Principals: []Principal{
			{Name: SeedClusterPrinc, Customer: SeedCustomer, ClientID: SeedClusterPrinc,
				Grants: []Grant{{ResourceType: "customer", ResourceID: SeedCustomer}}},
			{Name: SeedOperatorPrinc, Customer: SeedCustomer, ClientID: SeedOperatorPrinc, CustomerAdmin: true, Operator: true,
				Grants: []Grant{{ResourceType: "customer", ResourceID: SeedCustomer}}},
		},
	}
	for _, loc := range []string{SeedLocation, SeedLocation2} {
		seed.Images = append(seed.Images,
			Image{Location: loc, Name: SeedImageName, OSType: "Linux", OSName: "Ubuntu 24.04 LTS", BootType: "bios", BootDiskSize: 10, Memory: 512, Public: true},
			Image{Location: loc, Name: "Flatcar stable", OSType: "Linux", OSName: "Flatcar Container Linux", BootType: "uefi", BootDiskSize: 8, Memory: 1024, Public: true},
		)
	}
	return seed
}

func (s *state) apply(seed Seed) error {
	for i := range seed.Locations {
		l := seed.Locations[i]
		for _, n := range l.ExternalNetworks {
			if n.Used == nil {
				n.Used = map[string]string{}
			}
			if n.ID >= s.NextInt {
				s.NextInt = n.ID + 1
			}
		}
		s.Locations[l.Name] = &l
	}
	for i := range seed.Customers {
		c := seed.Customers[i]
		for _, l := range c.Locations {
			if s.Locations[l] == nil {
				return fmt.Errorf("customer %s: unknown location %s", c.ID, l)
			}
		}
		s.Customers[c.ID] = &c
	}
	for i := range seed.Images {
		img := seed.Images[i]
		if s.Locations[img.Location] == nil {
			return fmt.Errorf("image %s: unknown location %s", img.Name, img.Location)
		}
		img.ID = s.intID()
		if img.Status == "" {
			img.Status = "CREATED"
		}
		s.Images[img.ID] = &img
	}
	for i := range seed.Principals {
		p := seed.Principals[i]
		if s.Customers[p.Customer] == nil {
			return fmt.Errorf("principal %s: unknown customer %s", p.Name, p.Customer)
		}
		if p.ClientID != "" && p.Secret == "" {
			p.Secret = randomHex(24)
		}
		p.Grants = slices.Clone(p.Grants)
		s.Principals[p.Name] = &p
	}
	return nil
}
