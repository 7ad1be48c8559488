import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.List;
import java.util.Map;

import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.json.JsonConverter;

/**
 * Reads record values as a Kafka Connect sink would: each line of the file
 * named by the first argument is one value, base64-encoded, handed to
 * Kafka Connect's own JsonConverter (schemas.enable=true) through
 * toConnectData. Prints "ok N SCHEMA-TYPE VALUE" for each value it reads
 * and "FAIL N ..." for each it refuses; exits 1 if it refused any, 2 on
 * bad usage. Used by test/integration/envelopes_test.go.
 */
public class ConnectJsonCheck {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: ConnectJsonCheck FILE (one base64 value a line)");
            System.exit(2);
        }
        JsonConverter converter = new JsonConverter();
        converter.configure(Map.of("schemas.enable", "true"), false);
        List<String> lines = Files.readAllLines(Path.of(args[0]), StandardCharsets.UTF_8);
        int failed = 0;
        for (int i = 0; i < lines.size(); i++) {
            byte[] value = Base64.getDecoder().decode(lines.get(i).trim());
            try {
                SchemaAndValue sv = converter.toConnectData("outbox-cdc-check", value);
                if (sv.schema() == null || !(sv.value() instanceof Struct)) {
                    throw new IllegalStateException("no struct schema: " + sv);
                }
                ((Struct) sv.value()).validate();
                System.out.println("ok " + i + " " + sv.schema().type() + " " + sv.value());
            } catch (Exception e) {
                failed++;
                System.out.println("FAIL " + i + " " + e + " <- " + new String(value, StandardCharsets.UTF_8));
            }
        }
        if (failed > 0) {
            System.err.println("JsonConverter refused " + failed + " of " + lines.size() + " values");
            System.exit(1);
        }
    }
}
