// Package gpuaddon is the GPU add-on's end-to-end test (-tags e2e): the stand-in device plugin
// registered with a real kubelet under the resource the add-on's device plugin advertises.
package gpuaddon
