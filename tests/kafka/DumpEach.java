// DumpLogSegments of each file on its own, in one JVM: for every file named on the command line
// after the options, Kafka's own DumpLogSegments.main("--files", file, options...) runs
// with System.out and System.err captured, and one JSON line per file says what it printed and
// the status it returned. The oracle tests use it where DumpLogSegments stops at the first file
// that throws (an index that fails its sanity check): one JVM instead of one per such file.
// Usage: java -cp <kafka> tests/kafka/DumpEach.java OPTION... -- FILE...
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public class DumpEach {
    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) throws Exception {
        int sep = Arrays.asList(args).indexOf("--");
        List<String> options = Arrays.asList(args).subList(0, sep);
        List<String> files = Arrays.asList(args).subList(sep + 1, args.length);
        Class<?> cls = Class.forName("org.apache.kafka.tools.DumpLogSegments");
        // main returns, or throws what stops the tool (the JVM would exit 1 with its trace)
        Method run = cls.getDeclaredMethod("main", String[].class);
        PrintStream out = System.out, err = System.err;
        for (String file : files) {
            ByteArrayOutputStream o = new ByteArrayOutputStream(), e = new ByteArrayOutputStream();
            List<String> argv = new ArrayList<>(List.of("--files", file));
            argv.addAll(options);
            int rc;
            System.setOut(new PrintStream(o, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(e, true, StandardCharsets.UTF_8));
            try {
                run.invoke(null, (Object) argv.toArray(new String[0]));
                rc = 0;
            } catch (java.lang.reflect.InvocationTargetException ex) {
                System.err.print("Exception in thread \"main\" ");
                ex.getCause().printStackTrace();
                rc = 1;
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(out);
                System.setErr(err);
            }
            out.println("{\"file\": " + json(file) + ", \"rc\": " + rc + ", \"stdout\": "
                + json(o.toString(StandardCharsets.UTF_8)) + ", \"stderr\": "
                + json(e.toString(StandardCharsets.UTF_8)) + "}");
        }
    }
}
