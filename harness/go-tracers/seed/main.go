// The seed's incident as a Go service on confluent-kafka-go, traced by the real
// dd-trace-go with Data Streams Monitoring on (DD_DATA_STREAMS_ENABLED=true,
// DD_TRACE_AGENT_URL: streamsight's intake).
//
// usage: seed BOOTSTRAP ORDERS GROUP
//
// Produces 1000 records to ORDERS (partition 0), prints "produced 1000"; a
// consumer, a live member of GROUP, reads ORDERS up to offset 500, commits 500
// and stays there (paused, polling), committing 500 again every second: prints
// "stuck 500". Then, on stdin, "fail": every 200 ms a record larger than the
// topic's max.message.bytes (the broker refuses it), printing "failing" at the
// first failed delivery; "recover": small records again, printing "recovered
// OFFSET" at the first success; "close" (or the end of input): closes both
// clients and prints "closed".
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	ddkafka "github.com/DataDog/dd-trace-go/contrib/confluentinc/confluent-kafka-go/kafka.v2/v2"
	"github.com/DataDog/dd-trace-go/v2/ddtrace/tracer"
)

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
}

func main() {
	bootstrap, orders, group := os.Args[1], os.Args[2], os.Args[3]
	must(tracer.Start())
	defer tracer.Stop()

	producer, err := ddkafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":  bootstrap,
		"client.id":          "seed-go-producer",
		"linger.ms":          0,
		// Batches under the test topic's 64 KiB max.message.bytes.
		"batch.size": 16384,
		"message.timeout.ms": 3000,
		"retries":            0,
	})
	must(err)
	topic := orders
	deliveries := make(chan kafka.Event, 1000)
	for i := 0; i < 1000; i++ {
		must(producer.Produce(&kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0},
			Value:          []byte(fmt.Sprintf("order %d", i)),
		}, deliveries))
	}
	for i := 0; i < 1000; i++ {
		m := (<-deliveries).(*kafka.Message)
		must(m.TopicPartition.Error)
	}
	fmt.Println("produced 1000")

	consumer, err := ddkafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":  bootstrap,
		"group.id":           group,
		"client.id":          "seed-go-consumer",
		"auto.offset.reset":  "earliest",
		"enable.auto.commit": false,
	})
	must(err)
	must(consumer.Subscribe(orders, nil))
	position := int64(0)
	for position < 500 {
		ev := consumer.Poll(200)
		if m, ok := ev.(*kafka.Message); ok && int64(m.TopicPartition.Offset) < 500 {
			position = int64(m.TopicPartition.Offset) + 1
		}
	}
	stuck := []kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: 500}}
	assignment, err := consumer.Assignment()
	must(err)
	must(consumer.Pause(assignment))
	_, err = consumer.CommitOffsets(stuck)
	must(err)
	fmt.Println("stuck 500")

	var mode atomic.Value
	mode.Store("steady")
	closing := make(chan struct{})
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			line := strings.TrimSpace(in.Text())
			if line == "close" {
				break
			}
			mode.Store(line)
		}
		close(closing)
	}()
	var saidFailing, saidRecovered atomic.Bool
	go func() {
		for e := range producer.Events() {
			m, ok := e.(*kafka.Message)
			if !ok {
				continue
			}
			if m.TopicPartition.Error != nil {
				if !saidFailing.Swap(true) {
					fmt.Println("failing", m.TopicPartition.Error)
				}
			} else if mode.Load() == "recover" && !saidRecovered.Swap(true) {
				fmt.Println("recovered", m.TopicPartition.Offset)
			}
		}
	}()
	tooLarge := make([]byte, 256*1024)
	lastCommit := time.Now()
	for {
		select {
		case <-closing:
			consumer.Close()
			producer.Close()
			fmt.Println("closed")
			return
		default:
		}
		if time.Since(lastCommit) >= time.Second {
			_, _ = consumer.CommitOffsets(stuck)
			lastCommit = time.Now()
		}
		consumer.Poll(0)
		switch mode.Load() {
		case "fail":
			_ = producer.Produce(&kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0},
				Value:          tooLarge,
			}, nil)
		case "recover":
			_ = producer.Produce(&kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0},
				Value:          []byte("again"),
			}, nil)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
