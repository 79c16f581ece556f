import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;

import org.apache.kafka.common.TopicPartition;

/**
 * The iteration order of the JVM's hash tables, for tests/kafka_oracle/test_jvm_hash_orders.py. Reads lines
 * from stdin: "M key" puts into a Scala mutable.HashMap[String, _], "C key" calls
 * computeIfAbsent on a java.util.HashMap[String, _], "S topic p1,p2,..." adds those partitions
 * to a Scala mutable.HashSet[TopicPartition] with ++= of an immutable Set (as Kafka's
 * TransactionLog.readTxnRecordValue does); "P" prints the three orders (keys joined by \u0001)
 * and starts afresh.
 */
public class HashOrderProbe {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        scala.collection.mutable.HashMap<String, Object> scalaMap = new scala.collection.mutable.HashMap<>();
        scala.collection.mutable.HashSet<TopicPartition> scalaSet = new scala.collection.mutable.HashSet<>();
        HashMap<String, Object> javaMap = new HashMap<>();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.startsWith("M ")) {
                scalaMap.put(line.substring(2), 1);
            } else if (line.startsWith("C ")) {
                javaMap.computeIfAbsent(line.substring(2), k -> 1);
            } else if (line.startsWith("S ")) {
                String[] parts = line.split(" ");
                List<TopicPartition> tps = new ArrayList<>();
                for (String p : parts[2].split(",")) tps.add(new TopicPartition(parts[1], Integer.parseInt(p)));
                scalaSet.addAll(scala.jdk.javaapi.CollectionConverters.asScala(tps).toSet());
            } else if (line.equals("P")) {
                System.out.println("M " + scalaMap.keys().mkString("\u0001"));
                System.out.println("S " + scalaSet.mkString("\u0001"));
                System.out.println("C " + String.join("\u0001", javaMap.keySet()));
                scalaMap = new scala.collection.mutable.HashMap<>();
                scalaSet = new scala.collection.mutable.HashSet<>();
                javaMap = new HashMap<>();
            }
        }
    }
}
