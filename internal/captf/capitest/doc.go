// Package capitest holds the tests that run CAPTF beside Cluster API's own core controllers on a
// real API server: they prove the contract from CAPI's side (the Cluster takes its endpoint from
// the TerraformCluster, Machines their provider IDs from their TerraformMachines, MachinePools
// their provider ID lists and replicas from their TerraformMachinePools as they scale, a Machine
// per pool instance that the autoscaler's calls and a MachineHealthCheck remove exactly, CAPI's
// owner references and pause reach CAPTF).
package capitest
