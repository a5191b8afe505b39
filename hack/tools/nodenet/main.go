// Command nodenet is the pod network of the offline kind node image.
//
// kind's own network daemon (kindnetd) lives in a nested Go module that the
// module proxy does not serve, so the offline image ships this small
// replacement with the same contract: every node of a kind cluster sits on one
// Docker network, so pods are reached by a plain route to each node's podCIDR
// via that node's InternalIP. nodenet, as a DaemonSet on every node:
//   - writes the CNI configuration (ptp + host-local with this node's podCIDR,
//     and portmap) once the node has a podCIDR, which makes the node Ready;
//   - keeps one route per other node's podCIDR, from a watch on Nodes;
//   - masquerades traffic that leaves the pod network for the outside.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

func main() {
	nodeName := mustEnv("NODE_NAME")
	podSubnet := mustEnv("POD_SUBNET")
	cniDir := envOr("CNI_CONFIG_DIR", "/etc/cni/net.d")

	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatalf("in-cluster config: %v", err)
	}
	// kind patches CONTROL_PLANE_ENDPOINT in, so that the network comes up
	// without waiting for kube-proxy to program the kubernetes Service.
	if ep := os.Getenv("CONTROL_PLANE_ENDPOINT"); ep != "" {
		cfg.Host = "https://" + ep
	}
	client := kubernetes.NewForConfigOrDie(cfg)

	if err := ensureMasquerade(podSubnet); err != nil {
		log.Fatalf("masquerade rule: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	factory := informers.NewSharedInformerFactory(client, 5*time.Minute)
	nodes := factory.Core().V1().Nodes().Informer()
	sync := func(obj interface{}) {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		if node.Name == nodeName {
			if err := writeCNIConfig(cniDir, node); err != nil {
				log.Printf("node=%s writing CNI config: %v", node.Name, err)
			}
			return
		}
		if err := routeToNode(node); err != nil {
			log.Printf("node=%s route: %v", node.Name, err)
		}
	}
	_, err = nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    sync,
		UpdateFunc: func(_, obj interface{}) { sync(obj) },
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if node, ok := obj.(*corev1.Node); ok && node.Name != nodeName {
				for _, cidr := range node.Spec.PodCIDRs {
					_ = run("ip", "route", "del", cidr)
				}
			}
		},
	})
	if err != nil {
		log.Fatalf("node handler: %v", err)
	}
	log.Printf("nodenet starting node=%s podSubnet=%s", nodeName, podSubnet)
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}

func writeCNIConfig(dir string, node *corev1.Node) error {
	if len(node.Spec.PodCIDRs) == 0 {
		return nil // the node IPAM controller has not assigned one yet
	}
	ranges := make([][]map[string]string, 0, len(node.Spec.PodCIDRs))
	routes := []map[string]string{}
	for _, cidr := range node.Spec.PodCIDRs {
		ranges = append(ranges, []map[string]string{{"subnet": cidr}})
		if strings.Contains(cidr, ":") {
			routes = append(routes, map[string]string{"dst": "::/0"})
		} else {
			routes = append(routes, map[string]string{"dst": "0.0.0.0/0"})
		}
	}
	conf := map[string]interface{}{
		"cniVersion": "0.4.0",
		"name":       "kindnet",
		"plugins": []interface{}{
			map[string]interface{}{
				"type":   "ptp",
				"ipMasq": false,
				"mtu":    hostMTU(node),
				"ipam": map[string]interface{}{
					"type":    "host-local",
					"dataDir": "/run/cni-ipam-state",
					"routes":  routes,
					"ranges":  ranges,
				},
			},
			map[string]interface{}{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "10-kindnet.conflist")
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	log.Printf("node=%s podCIDRs=%v wrote %s", node.Name, node.Spec.PodCIDRs, path)
	return os.Rename(tmp, path)
}

// hostMTU is the MTU of the interface that holds the node's InternalIP.
func hostMTU(node *corev1.Node) int {
	ifaces, err := net.Interfaces()
	if err != nil {
		return 1500
	}
	for _, addr := range node.Status.Addresses {
		if addr.Type != corev1.NodeInternalIP {
			continue
		}
		for _, iface := range ifaces {
			addrs, _ := iface.Addrs()
			for _, a := range addrs {
				if ipnet, ok := a.(*net.IPNet); ok && ipnet.IP.String() == addr.Address {
					return iface.MTU
				}
			}
		}
	}
	return 1500
}

func routeToNode(node *corev1.Node) error {
	for _, cidr := range node.Spec.PodCIDRs {
		isV6 := strings.Contains(cidr, ":")
		for _, addr := range node.Status.Addresses {
			ip := net.ParseIP(addr.Address)
			if addr.Type != corev1.NodeInternalIP || ip == nil || (ip.To4() == nil) != isV6 {
				continue
			}
			if err := run("ip", "route", "replace", cidr, "via", addr.Address); err != nil {
				return err
			}
			break
		}
	}
	return nil
}

// ensureMasquerade source-NATs pod traffic to anything outside the pod network.
func ensureMasquerade(podSubnet string) error {
	for _, cidr := range strings.Split(podSubnet, ",") {
		cmd := "iptables"
		if strings.Contains(cidr, ":") {
			cmd = "ip6tables"
		}
		rule := []string{"POSTROUTING", "-s", cidr, "!", "-d", cidr, "-m", "addrtype", "!", "--dst-type", "LOCAL",
			"-m", "comment", "--comment", "nodenet: masquerade pod traffic leaving the pod network", "-j", "MASQUERADE"}
		if run(cmd, append([]string{"-t", "nat", "-C"}, rule...)...) == nil {
			continue
		}
		if err := run(cmd, append([]string{"-t", "nat", "-A"}, rule...)...); err != nil {
			return err
		}
	}
	return nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func mustEnv(key string) string {
	v := os.Getenv(key)
	if v == "" {
		log.Fatalf("environment variable %s is required", key)
	}
	return v
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
