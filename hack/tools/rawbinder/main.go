// Command rawbinder binds pending pods to nodes round robin, with no
// scheduling logic at all: no filters, no scores, no view of the nodes'
// resources. make bench runs it as the raw-binder contender (see
// bench/contenders.py), a baseline for the schedulers: how many Bindings per
// second the API server takes at a given client QPS and burst.
//
// It watches the pods that name --scheduler-name and have no node yet, and
// its --workers goroutines bind each one to the next node of those that match
// --node-selector (listed once, at start) through the pods/binding
// subresource. With --events it also records a Scheduled event for each pod
// it bound, through client-go's events.k8s.io/v1 broadcaster as kube-scheduler
// does: the API server's limit for a scheduler that reports what it did. It
// logs "rawbinder ready" once its watch is synced, and the number of pods it
// bound when SIGTERM or SIGINT stops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (default: in-cluster config)")
	namespace := flag.String("namespace", "", "bind only the pods of this namespace (default: all)")
	schedulerName := flag.String("scheduler-name", "rawbinder", "bind the pods whose spec.schedulerName is this")
	nodeSelector := flag.String("node-selector", "", "label selector of the nodes to bind to (default: all nodes)")
	qps := flag.Float64("kube-api-qps", 50, "client QPS towards the API server")
	burst := flag.Int("kube-api-burst", 100, "client burst towards the API server")
	workers := flag.Int("workers", 16, "concurrent binds")
	withEvents := flag.Bool("events", false, "record a Scheduled event (events.k8s.io/v1) for each pod bound")
	progress := flag.Duration("progress", 10*time.Second, "log the count of bound pods this often (0: never)")
	flag.Parse()
	log.SetFlags(log.Ldate | log.Ltime | log.Lmicroseconds)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, *kubeconfig, *namespace, *schedulerName, *nodeSelector, *qps, *burst, *workers, *withEvents, *progress); err != nil {
		log.Fatalf("rawbinder: %v", err)
	}
}

func run(ctx context.Context, kubeconfig, namespace, schedulerName, nodeSelector string,
	qps float64, burst, workers int, withEvents bool, progress time.Duration) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	config.QPS, config.Burst, config.UserAgent = float32(qps), burst, "rawbinder"
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}

	nodeList, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeSelector})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	nodes := make([]string, 0, len(nodeList.Items))
	for _, n := range nodeList.Items {
		nodes = append(nodes, n.Name)
	}
	if len(nodes) == 0 {
		return fmt.Errorf("no node matches %q", nodeSelector)
	}
	sort.Strings(nodes)

	// Only unbound pods of our scheduler name reach the informer; a bound pod
	// leaves its selection (a delete event, ignored).
	selector := fields.AndSelectors(fields.OneTermEqualSelector("spec.nodeName", ""),
		fields.OneTermEqualSelector("spec.schedulerName", schedulerName)).String()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	podInformer := factory.Core().V1().Pods()
	pods := podInformer.Lister()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok {
				queue.Add(cache.MetaObjectToName(pod))
			}
		},
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced) {
		return fmt.Errorf("pod watch not synced")
	}
	var recorder events.EventRecorder
	if withEvents {
		broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
		broadcaster.StartRecordingToSink(ctx.Done())
		defer broadcaster.Shutdown()
		recorder = broadcaster.NewRecorder(scheme.Scheme, schedulerName)
	}
	log.Printf("rawbinder ready: %d nodes, scheduler name %q, namespace %q, %d workers, client QPS/burst %g/%d, events %t",
		len(nodes), schedulerName, namespace, workers, qps, burst, withEvents)

	var bound, failed, next atomic.Int64
	bind := func(key cache.ObjectName) error {
		pod, err := pods.Pods(key.Namespace).Get(key.Name)
		if err != nil {
			return err // bound or deleted since: not found
		}
		node := nodes[(next.Add(1)-1)%int64(len(nodes))]
		err = client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		if err == nil && recorder != nil {
			recorder.Eventf(pod, nil, corev1.EventTypeNormal, "Scheduled", "Binding",
				"Successfully assigned %v/%v to %v", pod.Namespace, pod.Name, node)
		}
		return err
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				key, shutdown := queue.Get()
				if shutdown {
					return
				}
				err := bind(key)
				switch {
				case err == nil:
					bound.Add(1)
					queue.Forget(key)
				case ctx.Err() != nil:
				case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
					queue.Forget(key) // gone, or bound by someone else
				default:
					failed.Add(1)
					log.Printf("binding %s: %v (retrying)", key, err)
					queue.AddRateLimited(key)
				}
				queue.Done(key)
			}
		})
	}

	if progress > 0 {
		ticker := time.NewTicker(progress)
		defer ticker.Stop()
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-ticker.C:
					log.Printf("bound %d pods", bound.Load())
				}
			}
		}()
	}
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	log.Printf("rawbinder exiting: bound %d pods, %d binds failed", bound.Load(), failed.Load())
	return nil
}
