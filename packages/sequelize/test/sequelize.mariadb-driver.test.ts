import { describeMatrix } from './support/matrix'

// Sequelize's 'mariadb' dialect (the mariadb connector) with a synchronous and an asynchronous source.
describeMatrix('mysql', 'mariadb', ['in-process', 'async in-process', 'MysqlSource'])
