package controllers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	capvcov1 "github.com/capx-io/capx/api/capvco/v1alpha1"
	"github.com/capx-io/capx/internal/capi"
	"github.com/capx-io/capx/internal/capvco/decide"
	"github.com/capx-io/capx/internal/capvco/dns"
	"github.com/capx-io/capx/internal/capvco/imagepublish"
	"github.com/capx-io/capx/internal/capvco/names"
	"github.com/capx-io/capx/internal/capvco/platform"
	"github.com/capx-io/capx/internal/capvco/registrycert"
	"github.com/capx-io/capx/internal/capvco/vm"
	"github.com/capx-io/capx/internal/vco"
)

// Pure setters: they turn what a reconcile observed into status, and make no calls.

var clusterConditions = []string{
	capvcov1.CredentialsReadyCondition, capvcov1.CloudspaceReadyCondition, capvcov1.LoadBalancerReadyCondition,
	capvcov1.DNSReadyCondition, capvcov1.GeoMeshReadyCondition, capvcov1.LocationImagesReadyCondition,
	capvcov1.RegistryCertificateReadyCondition, capvcov1.AddonsReadyCondition, capvcov1.SRIOVAgentReadyCondition,
}

var machineConditions = []string{capvcov1.CredentialsReadyCondition, capvcov1.VMReadyCondition, capvcov1.GPUsReadyCondition}

var shared = []string{clusterv1.DeletingCondition, clusterv1.PausedCondition}

func set(obj capi.Object, typ string, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(obj, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: obj.GetGeneration()})
}

func setCredentials(obj capi.Object, err error) {
	switch {
	case err == nil:
		set(obj, capvcov1.CredentialsReadyCondition, metav1.ConditionTrue, capvcov1.CredentialsReadyReason, "")
	case errors.Is(err, platform.ErrCredentialsNotFound):
		set(obj, capvcov1.CredentialsReadyCondition, metav1.ConditionFalse, capvcov1.CredentialsNotFoundReason,
			err.Error()+": create it with the keys url, customer and jwt (or clientID, clientSecret and iamURL)")
	default:
		set(obj, capvcov1.CredentialsReadyCondition, metav1.ConditionFalse, capvcov1.CredentialsInvalidReason, err.Error())
	}
}

// setClusterStatus computes the VCOCluster's conditions, Ready and provisioned.
func setClusterStatus(vc *capvcov1.VCOCluster, obs *clusterObserved) {
	if obs == nil {
		return
	}
	if obs.teardownActive {
		set(vc, clusterv1.DeletingCondition, metav1.ConditionTrue, clusterv1.DeletingReason, obs.teardown.message())
		if obs.credentials != nil {
			setCredentials(vc, obs.credentials)
		}
		capi.SetReady(vc, append(slices.Clone(clusterConditions), shared...), shared)
		return
	}
	setClusterRecords(vc, obs)
	setCredentials(vc, obs.credentials)
	if obs.credentials != nil {
		for _, t := range clusterConditions[1:] {
			conditions.Delete(vc, t)
		}
		waiting(vc, capvcov1.CloudspaceReadyCondition, "usable credentials")
	} else {
		setCloudspaceCondition(vc, obs)
	}
	setLoadBalancerCondition(vc, obs)
	setDNSCondition(vc, obs)
	if len(decide.Sites(vc.Spec)) > 1 {
		setGeoMeshCondition(vc, obs)
		setLocationImages(vc, obs)
	} else {
		conditions.Delete(vc, capvcov1.GeoMeshReadyCondition)
		conditions.Delete(vc, capvcov1.LocationImagesReadyCondition)
	}
	setRegistryCertificate(vc, obs.registry)
	setAddonsCondition(vc, obs.addons)
	setSRIOVCondition(vc, obs.sriov)
	vc.Status.FailureDomains = nil
	for _, s := range decide.Sites(vc.Spec) {
		vc.Status.FailureDomains = append(vc.Status.FailureDomains, clusterv1.FailureDomain{Name: s.Name, ControlPlane: ptr.To(true)})
	}
	// A missing location image stops only the machines of that location (their VMReady says
	// so): the cluster's infrastructure exists, so it is not part of Ready.
	// Nor is the registry certificate: the cluster runs without it in the platform's store.
	// Nor are the add-ons: they go into the workload cluster once its control plane runs,
	// which needs this VCOCluster provisioned first.
	readyFrom := slices.DeleteFunc(slices.Clone(clusterConditions), func(c string) bool {
		return c == capvcov1.LocationImagesReadyCondition || c == capvcov1.RegistryCertificateReadyCondition ||
			c == capvcov1.AddonsReadyCondition || c == capvcov1.SRIOVAgentReadyCondition
	})
	capi.SetReady(vc, append(readyFrom, shared...), shared)
	if conditions.IsTrue(vc, capvcov1.ReadyCondition) && vc.Spec.ControlPlaneEndpoint.Host != "" {
		vc.Status.Initialization.Provisioned = ptr.To(true)
	}
}

// waiting says that a condition's piece waits for another.
func waiting(obj capi.Object, typ, what string) {
	set(obj, typ, metav1.ConditionUnknown, capvcov1.ProvisioningReason, "waits for "+what)
}

func setLoadBalancerCondition(vc *capvcov1.VCOCluster, obs *clusterObserved) {
	switch {
	case obs.lbErr != nil:
		set(vc, capvcov1.LoadBalancerReadyCondition, metav1.ConditionFalse, capvcov1.ProvisioningFailedReason, obs.lbErr.Error())
	case obs.lbDone && vc.Status.LoadBalancer != nil:
		msg := "no control-plane API server answers yet, so the server pool is empty"
		if m := vc.Status.LoadBalancer.Members; len(m) > 0 {
			msg = "server pool members (API servers that answer): " + strings.Join(m, ", ")
		}
		if obs.membersErr != nil {
			msg += "; updating the members failed: " + obs.membersErr.Error()
		}
		set(vc, capvcov1.LoadBalancerReadyCondition, metav1.ConditionTrue, capvcov1.ProvisionedReason,
			fmt.Sprintf("%s:%d; %s", vc.Status.LoadBalancer.Address, lbPort(vc), msg))
	default:
		waiting(vc, capvcov1.LoadBalancerReadyCondition, "the primary site's cloudspace")
	}
}

func setDNSCondition(vc *capvcov1.VCOCluster, obs *clusterObserved) {
	switch {
	case vc.Spec.DNS == nil:
		conditions.Delete(vc, capvcov1.DNSReadyCondition)
		vc.Status.DNS = nil
	case obs.dnsErr != nil:
		set(vc, capvcov1.DNSReadyCondition, metav1.ConditionFalse, capvcov1.ProvisioningFailedReason, obs.dnsErr.Error())
	case obs.dnsProgress == nil:
		waiting(vc, capvcov1.DNSReadyCondition, "the load balancer")
	case obs.dnsProgress.Done:
		set(vc, capvcov1.DNSReadyCondition, metav1.ConditionTrue, capvcov1.ProvisionedReason,
			fmt.Sprintf("A record %s published with the platform's fixed TTL of %d s: after a failover to another site's address, clients may keep the old one for up to an hour", vc.Spec.DNS.Name, dns.TTLSeconds))
	default:
		msg := fmt.Sprintf("writing the A record %s in the background (a platform DNS write takes about 30 s)", vc.Spec.DNS.Name)
		if !obs.dnsProgress.Since.IsZero() {
			// The start, not the time since: a message that changed every reconcile would be a
			// status write every reconcile.
			msg += ", started at " + obs.dnsProgress.Since.UTC().Format(time.RFC3339)
		}
		if obs.dnsProgress.Err != nil {
			msg += "; the previous attempt failed: " + obs.dnsProgress.Err.Error()
		}
		set(vc, capvcov1.DNSReadyCondition, metav1.ConditionFalse, capvcov1.ProvisioningReason, msg)
	}
}

func setGeoMeshCondition(vc *capvcov1.VCOCluster, obs *clusterObserved) {
	switch {
	case obs.meshErr != nil:
		set(vc, capvcov1.GeoMeshReadyCondition, metav1.ConditionFalse, capvcov1.ProvisioningFailedReason, obs.meshErr.Error())
	case obs.mesh == nil:
		waiting(vc, capvcov1.GeoMeshReadyCondition, "every site's cloudspace")
	case !obs.mesh.Connected():
		set(vc, capvcov1.GeoMeshReadyCondition, metav1.ConditionFalse, capvcov1.ConnectingReason,
			"links not up yet: "+strings.Join(obs.mesh.Connecting, ", "))
	default:
		set(vc, capvcov1.GeoMeshReadyCondition, metav1.ConditionTrue, capvcov1.ProvisionedReason, fmt.Sprintf("%d links connected", obs.mesh.Links))
	}
}

// setClusterRecords writes what the phases found into status: the sites' cloudspaces, the
// load balancer and its members, the endpoint (once), the DNS record, and what the operator
// actions and the add-on delivery last checked.
func setClusterRecords(vc *capvcov1.VCOCluster, obs *clusterObserved) {
	for _, s := range obs.sites {
		if s.err == nil {
			setCloudspaceStatus(vc, s)
		}
	}
	if obs.lb != nil {
		address := obs.primary().Cloudspace.ExternalNetworkIP
		members := obs.members
		if members == nil {
			members = hostAddresses(obs.pool.Hosts)
		}
		setLoadBalancerStatus(vc, obs.lb.ID, obs.pool.ID, address, members)
		setEndpoint(vc, address, lbPort(vc))
	}
	if obs.platformRead {
		vc.Status.PlatformCheckedAt = ptr.To(metav1.NewTime(obs.now))
	}
	if vc.Spec.DNS != nil && obs.dnsProgress != nil {
		setDNSStatus(vc, obs.dnsProgress.Done)
	}
	setLocationImageRecords(vc, obs.images, obs.now)
	setRegistryRecord(vc, obs.registry, obs.now)
	setAddonRecords(vc, obs.addons, metav1.NewTime(obs.now))
}

// setLocationImageRecords records the images checked this pass, and drops the records of
// locations the spec no longer has.
func setLocationImageRecords(vc *capvcov1.VCOCluster, img *imagesObserved, now time.Time) {
	var want map[string]int64
	if vc.Spec.Geo != nil {
		want = vc.Spec.Geo.LocationImages
	}
	vc.Status.LocationImages = slices.DeleteFunc(vc.Status.LocationImages, func(r capvcov1.LocationImageStatus) bool {
		_, ok := want[r.Location]
		return !ok
	})
	if len(vc.Status.LocationImages) == 0 {
		vc.Status.LocationImages = nil
	}
	if img == nil || !img.checked {
		return
	}
	for _, o := range img.fresh {
		rec := capvcov1.LocationImageStatus{Location: o.Location, ID: o.ID, PublishCredential: img.credential, Visible: o.Visible, CheckedAt: metav1.NewTime(now)}
		if i := slices.IndexFunc(vc.Status.LocationImages, func(r capvcov1.LocationImageStatus) bool { return r.Location == o.Location }); i >= 0 {
			vc.Status.LocationImages[i] = rec
		} else {
			vc.Status.LocationImages = append(vc.Status.LocationImages, rec)
		}
	}
}

// locationImageStatus is the record of a location's image (nil when none).
func locationImageStatus(vc *capvcov1.VCOCluster, location string) *capvcov1.LocationImageStatus {
	for i := range vc.Status.LocationImages {
		if vc.Status.LocationImages[i].Location == location {
			return &vc.Status.LocationImages[i]
		}
	}
	return nil
}

// setRegistryRecord records the registry certificate's write of this pass.
func setRegistryRecord(vc *capvcov1.VCOCluster, obs *registryObserved, now time.Time) {
	if vc.Spec.Registry == nil || vc.Spec.Registry.CertificateSecretRef == nil {
		vc.Status.RegistryCertificate = nil
		return
	}
	if obs == nil || !obs.checked || obs.cert == nil {
		return
	}
	vc.Status.RegistryCertificate = &capvcov1.RegistryCertificateStatus{Domain: obs.cert.Domain, SHA256: obs.cert.Fingerprint,
		Credential: obs.credential, Stored: obs.err == nil, CheckedAt: metav1.NewTime(now)}
}

func setCloudspaceCondition(vc *capvcov1.VCOCluster, obs *clusterObserved) {
	var lost, failed, pending, ready []string
	for _, s := range obs.sites {
		label := fmt.Sprintf("%s (%s, site %s)", s.Cloudspace.Name, s.Cloudspace.ID, s.site.Name)
		switch {
		case s.err != nil:
			failed = append(failed, fmt.Sprintf("site %s: %v", s.site.Name, s.err))
		case s.Lost:
			lost = append(lost, label)
		case !s.Deployed():
			pending = append(pending, fmt.Sprintf("%s is %s", label, s.Cloudspace.Status))
		default:
			if s.Adopted {
				label += " adopted"
			}
			ready = append(ready, label)
		}
	}
	switch {
	case len(lost) > 0:
		set(vc, capvcov1.CloudspaceReadyCondition, metav1.ConditionFalse, capvcov1.NotFoundReason,
			"recorded cloudspace no longer exists on the platform and is not recreated (its VMs are gone with it): "+strings.Join(lost, ", ")+
				"; delete and recreate the cluster, or remove its entry from status.cloudspaces to create an empty one")
	case len(failed) > 0:
		set(vc, capvcov1.CloudspaceReadyCondition, metav1.ConditionFalse, capvcov1.ProvisioningFailedReason, strings.Join(failed, "; "))
	case len(pending) > 0 || len(ready) < len(decide.Sites(vc.Spec)):
		set(vc, capvcov1.CloudspaceReadyCondition, metav1.ConditionUnknown, capvcov1.ProvisioningReason,
			"waiting: "+strings.Join(append(pending, "ready: "+strings.Join(ready, ", ")), "; "))
	default:
		set(vc, capvcov1.CloudspaceReadyCondition, metav1.ConditionTrue, capvcov1.ProvisionedReason, strings.Join(ready, ", "))
	}
}

// cloudspaceStatus is the recorded cloudspace of a site (zero when none).
func cloudspaceStatus(vc *capvcov1.VCOCluster, site string) capvcov1.CloudspaceStatus {
	for _, c := range vc.Status.Cloudspaces {
		if c.Site == site {
			return c
		}
	}
	return capvcov1.CloudspaceStatus{}
}

func cloudspaceRequest(vc *capvcov1.VCOCluster, cluster string, site decide.Site) vco.CreateCloudspaceRequest {
	req := vco.CreateCloudspaceRequest{Name: names.Cloudspace(vc.Namespace, cluster, site.Name), Location: site.Location, PrivateNetwork: site.PrivateNetwork}
	if id := vc.Spec.Cloudspace.ExternalNetworkID; id != nil && site.Location == vc.Spec.Location {
		req.ExternalNetworkID = ptr.To(int(*id))
	}
	return req
}

func setCloudspaceStatus(vc *capvcov1.VCOCluster, s siteObserved) {
	prev := s.recorded
	entry := capvcov1.CloudspaceStatus{
		Site: s.site.Name, Location: s.site.Location, ID: s.Cloudspace.ID, Name: s.Cloudspace.Name,
		ExternalIP: s.Cloudspace.ExternalNetworkIP, Adopted: prev.Adopted || s.Adopted,
	}
	if s.Lost {
		entry.ExternalIP = prev.ExternalIP
	}
	i := slices.IndexFunc(vc.Status.Cloudspaces, func(c capvcov1.CloudspaceStatus) bool { return c.Site == s.site.Name })
	if i < 0 {
		vc.Status.Cloudspaces = append(vc.Status.Cloudspaces, entry)
		return
	}
	vc.Status.Cloudspaces[i] = entry
}

func hostAddresses(hosts []vco.PoolHost) []string {
	out := []string{}
	for _, h := range hosts {
		out = append(out, h.Address)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func setLoadBalancerStatus(vc *capvcov1.VCOCluster, lbID, poolID, address string, members []string) {
	if len(members) == 0 {
		members = nil
	}
	vc.Status.LoadBalancer = &capvcov1.LoadBalancerStatus{ID: lbID, ServerPoolID: poolID, Address: address, Members: members}
}

// setEndpoint sets spec.controlPlaneEndpoint once: the DNS name when spec.dns is set, else
// the load balancer's address.
func setEndpoint(vc *capvcov1.VCOCluster, address string, port int) {
	if vc.Spec.ControlPlaneEndpoint.Host != "" {
		return
	}
	host := address
	if vc.Spec.DNS != nil {
		host = strings.TrimSuffix(vc.Spec.DNS.Name, ".")
	}
	vc.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: host, Port: int32(port)}
}

func setDNSStatus(vc *capvcov1.VCOCluster, published bool) {
	vc.Status.DNS = &capvcov1.DNSStatus{Name: vc.Spec.DNS.Name, Published: published, TTLSeconds: dns.TTLSeconds}
}

// setMachineRecords writes what the phases found into status: the VM, where it runs, its
// addresses, when it was read, and the vGPU reservations.
func setMachineRecords(m *capvcov1.VCOMachine, obs *machineObserved) {
	if obs.vm != nil && obs.where != nil {
		setMachineVM(m, obs.where, obs.csID, *obs.vm)
	}
	switch {
	case obs.vmRead:
		m.Status.VM = &capvcov1.VMStatus{Name: obs.vm.Name, State: obs.vm.Status, CheckedAt: metav1.NewTime(obs.now)}
	case obs.lost:
		name := names.VM(m.Name)
		if m.Status.VM != nil {
			name = m.Status.VM.Name
		}
		m.Status.VM = &capvcov1.VMStatus{Name: name, State: vmStateNotFound, CheckedAt: metav1.NewTime(obs.now)}
	}
	if obs.gpusChanged {
		m.Status.GPUs = obs.gpus
		if len(m.Status.GPUs) == 0 {
			m.Status.GPUs = nil
		}
	}
}

// vmStateNotFound is status.vm.state of a VM the platform no longer has.
const vmStateNotFound = "NotFound"

func setMachineVM(m *capvcov1.VCOMachine, where *site, csID string, v vco.VM) {
	m.Status.VMID = ptr.To(int64(v.ID))
	m.Status.CloudspaceID = csID
	m.Status.FailureDomain = where.site.Name
	if m.Spec.ProviderID == "" {
		m.Spec.ProviderID = names.ProviderID(where.site.Location, v.ID)
	}
	addrs := []clusterv1.MachineAddress{{Type: clusterv1.MachineHostName, Address: m.Name}}
	if ip := v.PrivateIP(); ip != "" {
		addrs = append(addrs, clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: ip})
	}
	m.Status.Addresses = addrs
}

// setMachineStatus computes the VCOMachine's conditions, Ready and provisioned.
func setMachineStatus(m *capvcov1.VCOMachine, obs *machineObserved) {
	if obs == nil {
		return
	}
	all := append(slices.Clone(machineConditions), shared...)
	if obs.deleting != "" {
		set(m, clusterv1.DeletingCondition, metav1.ConditionTrue, clusterv1.DeletingReason, obs.deleting)
		capi.SetReady(m, all, shared)
		return
	}
	if !m.DeletionTimestamp.IsZero() {
		capi.SetReady(m, all, shared)
		return
	}
	setMachineRecords(m, obs)
	setVMCondition(m, obs)
	gpusReady := setGPUsCondition(m, obs)
	capi.SetReady(m, all, shared)
	if obs.vm != nil && vm.Running(*obs.vm) && gpusReady && !obs.lost {
		m.Status.Initialization.Provisioned = ptr.To(true)
	}
}

func setVMCondition(m *capvcov1.VCOMachine, obs *machineObserved) {
	if obs.waitReason != "" {
		conditions.Delete(m, capvcov1.CredentialsReadyCondition)
		status := metav1.ConditionUnknown
		if obs.waitReason == capvcov1.LocationImageMissingReason || obs.waitReason == capvcov1.BootstrapDataUnsupportedReason {
			status = metav1.ConditionFalse
		}
		set(m, capvcov1.VMReadyCondition, status, obs.waitReason, obs.waitMessage)
		return
	}
	setCredentials(m, obs.credentials)
	switch {
	case obs.credentials != nil:
		waiting(m, capvcov1.VMReadyCondition, "usable credentials")
	case obs.lost:
		set(m, capvcov1.VMReadyCondition, metav1.ConditionFalse, capvcov1.NotFoundReason,
			obs.vmErr.Error()+"; it is not recreated under a Machine Cluster API thinks is healthy: delete the Machine to replace it")
	case obs.vmErr != nil:
		set(m, capvcov1.VMReadyCondition, metav1.ConditionFalse, capvcov1.ProvisioningFailedReason, obs.vmErr.Error())
	case obs.vm == nil:
		set(m, capvcov1.VMReadyCondition, metav1.ConditionUnknown, capvcov1.ProvisioningReason, "creating the VM")
	case !vm.Running(*obs.vm):
		set(m, capvcov1.VMReadyCondition, metav1.ConditionFalse, capvcov1.ProvisioningReason,
			fmt.Sprintf("VM %d (%s) is %s, not RUNNING", obs.vm.ID, obs.vm.Name, obs.vm.Status))
	default:
		set(m, capvcov1.VMReadyCondition, metav1.ConditionTrue, capvcov1.ProvisionedReason,
			fmt.Sprintf("VM %d (%s) runs at %s", obs.vm.ID, obs.vm.Name, obs.vm.PrivateIP()))
	}
}

// setGPUsCondition reports the vGPU reservations; ready when none is wanted or all are attached.
func setGPUsCondition(m *capvcov1.VCOMachine, obs *machineObserved) (ready bool) {
	switch {
	case obs.gpuWanted == 0:
		conditions.Delete(m, capvcov1.GPUsReadyCondition)
		return true
	case obs.gpuErr != nil:
		set(m, capvcov1.GPUsReadyCondition, metav1.ConditionFalse, capvcov1.ProvisioningFailedReason, obs.gpuErr.Error())
		return false
	case obs.vm == nil:
		waiting(m, capvcov1.GPUsReadyCondition, "the VM")
		return false
	}
	attached := 0
	for _, g := range obs.gpus {
		if g.Attached {
			attached++
		}
	}
	if attached < obs.gpuWanted {
		set(m, capvcov1.GPUsReadyCondition, metav1.ConditionFalse, capvcov1.ProvisioningReason, fmt.Sprintf("%d of %d vGPUs attached", attached, obs.gpuWanted))
		return false
	}
	set(m, capvcov1.GPUsReadyCondition, metav1.ConditionTrue, capvcov1.ProvisionedReason, fmt.Sprintf("%d vGPUs reserved and attached", attached))
	return true
}

// setLocationImages reports whether every site's location has its image and can see it.
func setLocationImages(vc *capvcov1.VCOCluster, obs *clusterObserved) {
	set := func(status metav1.ConditionStatus, reason, msg string) {
		set(vc, capvcov1.LocationImagesReadyCondition, status, reason, msg)
	}
	if len(obs.missingImages) > 0 {
		set(metav1.ConditionFalse, capvcov1.LocationImageMissingReason,
			fmt.Sprintf("spec.geo.locationImages has no image for %s: images are per location and do not travel; publish one there and add its id", strings.Join(obs.missingImages, ", ")))
		return
	}
	img := obs.images
	if img == nil {
		set(metav1.ConditionTrue, capvcov1.ProvisionedReason, "")
		return
	}
	if img.retrying {
		// The last check's message stands until the retry (status.locationImages[].checkedAt).
		if conditions.Get(vc, capvcov1.LocationImagesReadyCondition) == nil {
			set(metav1.ConditionFalse, capvcov1.ProvisioningFailedReason, "the last check failed; it is tried again a minute after it")
		}
		return
	}
	if img.err != nil {
		reason := capvcov1.ProvisioningFailedReason
		switch {
		case errors.Is(img.err, platform.ErrCredentialsNotFound):
			reason = capvcov1.CredentialsNotFoundReason
		case errors.Is(img.err, vco.ErrUnauthorized):
			reason = capvcov1.CredentialsInvalidReason
		}
		set(metav1.ConditionFalse, reason, "checking the location images: "+img.err.Error())
		return
	}
	var visible, problems []string
	reason := ""
	for _, o := range img.outcomes {
		if o.Visible {
			visible = append(visible, fmt.Sprintf("%s=%d", o.Location, o.ID))
			continue
		}
		r, problem := imageProblem(o, img.credential)
		reason = cmpReason(reason, r)
		problems = append(problems, problem)
	}
	if len(problems) > 0 {
		set(metav1.ConditionFalse, reason, strings.Join(problems, "; "))
		return
	}
	set(metav1.ConditionTrue, capvcov1.ProvisionedReason, "every site's location sees its image: "+strings.Join(visible, ", "))
}

// imageProblem says why a location's image is not visible and what to do.
func imageProblem(o imagepublish.Outcome, credential string) (reason, problem string) {
	switch {
	case errors.Is(o.Err, imagepublish.ErrNotVisible) && credential == "":
		return capvcov1.LocationImageNotVisibleReason, fmt.Sprintf("image %d is not visible to the cluster's credential in %s: have your whitesky.cloud operator publish it there, or set spec.geo.imagePublishCredentialSecretRef to an operator credential", o.ID, o.Location)
	case errors.Is(o.Err, imagepublish.ErrNoSuchImage):
		return capvcov1.LocationImageNotVisibleReason, fmt.Sprintf("image %d does not exist in %s: upload it there and put its id in spec.geo.locationImages", o.ID, o.Location)
	case isForbidden(o.Err):
		return capvcov1.OperatorCredentialForbiddenReason, fmt.Sprintf("publishing image %d in %s with the credential of Secret %s (spec.geo.imagePublishCredentialSecretRef) was refused (403): publishing is operator-privileged, so it must be a whitesky.cloud operator credential", o.ID, o.Location, credential)
	default:
		return capvcov1.ProvisioningFailedReason, fmt.Sprintf("image %d in %s: %v", o.ID, o.Location, o.Err)
	}
}

// cmpReason keeps the first reason of a list of problems.
func cmpReason(have, next string) string {
	if have != "" {
		return have
	}
	return next
}

// setRegistryCertificate reports the registry certificate in the platform's certificate store.
func setRegistryCertificate(vc *capvcov1.VCOCluster, obs *registryObserved) {
	set := func(status metav1.ConditionStatus, reason, msg string) {
		set(vc, capvcov1.RegistryCertificateReadyCondition, status, reason, msg)
	}
	reg := vc.Spec.Registry
	switch {
	case reg == nil || (reg.CertificateSecretRef == nil && reg.CertCredentialSecretRef == nil):
		conditions.Delete(vc, capvcov1.RegistryCertificateReadyCondition)
		return
	case reg.CertificateSecretRef == nil:
		set(metav1.ConditionFalse, capvcov1.CertificateInvalidReason,
			"spec.registry.certCredentialSecretRef is set but spec.registry.certificateSecretRef is not: name the kubernetes.io/tls Secret with the registry's certificate to upload")
		return
	case obs == nil:
		set(metav1.ConditionUnknown, capvcov1.ProvisioningReason, "waits for usable credentials")
		return
	case obs.retrying:
		// The last write's message stands until the retry (status.registryCertificate.checkedAt).
		if conditions.Get(vc, capvcov1.RegistryCertificateReadyCondition) == nil {
			set(metav1.ConditionFalse, capvcov1.ProvisioningFailedReason, "the last write failed; it is tried again a minute after it")
		}
		return
	}
	using := fmt.Sprintf("the credential of Secret %s (spec.registry.certCredentialSecretRef)", obs.credential)
	if obs.clusterCredential {
		using = fmt.Sprintf("the cluster's credential (Secret %s)", obs.credential)
	}
	switch err := obs.err; {
	case err == nil:
		set(metav1.ConditionTrue, capvcov1.ProvisionedReason, fmt.Sprintf("the %s is in the platform's SSL certificate store", obs.cert))
	case errors.Is(err, errCertificateSecretNotFound), errors.Is(err, registrycert.ErrInvalid):
		set(metav1.ConditionFalse, capvcov1.CertificateInvalidReason, err.Error())
	case errors.Is(err, platform.ErrCredentialsNotFound):
		set(metav1.ConditionFalse, capvcov1.CredentialsNotFoundReason, err.Error()+" (spec.registry.certCredentialSecretRef)")
	case isForbidden(err):
		hint := "check that it is a whitesky.cloud operator credential"
		if obs.clusterCredential {
			hint = "a per-cluster customer credential may not write it: set spec.registry.certCredentialSecretRef to an operator credential, or have your whitesky.cloud operator upload it"
		}
		set(metav1.ConditionFalse, capvcov1.OperatorCredentialForbiddenReason, fmt.Sprintf(
			"the platform refused to write the SSL certificate store (403) with %s for the %s: %s", using, obs.cert, hint))
	default:
		set(metav1.ConditionFalse, capvcov1.ProvisioningFailedReason, err.Error())
	}
}
