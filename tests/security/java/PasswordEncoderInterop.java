import java.util.Optional;
import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.security.PasswordEncoder;

public class PasswordEncoderInterop {
    public static void main(String[] args) throws Exception {
        PasswordEncoder enc = PasswordEncoder.encrypting(new Password(args[1]), (String) null,
                "AES/CBC/PKCS5Padding", 128, 4096);
        if (args[0].equals("encode")) System.out.println(enc.encode(new Password(args[2])));
        else System.out.println(enc.decode(args[2]).value());
    }
}
