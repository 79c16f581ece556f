import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HexFormat;

import org.apache.kafka.common.utils.Utils;

/**
 * Kafka's text of bytes, for tests/kafka_oracle/test_java_utf8.py: reads lines of hex from stdin, decodes each
 * with Utils.utf8(byte[]) (new String(bytes, UTF_8), as DumpLogSegments and the message readers
 * do) and prints the string's UTF-16 code units in hex, a line each.
 */
public class Utf8Probe {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "US-ASCII"));
        HexFormat hex = HexFormat.of();
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String text = Utils.utf8(hex.parseHex(line));
            for (int i = 0; i < text.length(); i++)
                out.append(String.format("%04x", (int) text.charAt(i)));
            out.append('\n');
        }
        System.out.print(out);
    }
}
